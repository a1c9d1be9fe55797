"""``esrerank fit-hybrid``: the learned hybrid fitted again for an exported model, on dev queries searched
among the site's own collection, written into the model directory (config.json, then its manifest).

Why after export: at training time the only collection is the dev pairs' questions; the trade-off between
the first stage and the vectors depends on the collection searched (``training/hybrid_dev.py``), so the
fit that ``es setup`` turns into the engine's pipeline is best made on the index's documents. The scorer
is the exported graph (onnxruntime), so the vectors are the ones the sidecar serves. The directory is
rewritten in place only once the new config parses; a failure leaves it as it was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from es_plugin_bridge.core.hybrid_fusion import HybridFusion
from es_plugin_bridge.core.manifest import write_manifest
from es_plugin_bridge.core.model_config import parse_config
from es_plugin_bridge.data.types import Dataset, Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.scorer import ExportedScorer, Scorer, is_exported
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.hybrid_dev import hybrid_dev_queries
from es_plugin_bridge.training.hybrid_fit import fit_hybrid

CONFIG = "config.json"


def refit_hybrid(model_dir: Path, dev: Sequence[Dataset], corpus: Sequence[Question], *,
                 scorer: Scorer | None = None, first_stage: str = "bm25", seed: int = 0,
                 ) -> tuple[HybridFusion, dict[str, Any]]:
    """Fit the hybrid on ``dev``'s duplicate pairs among ``corpus`` and record it in ``model_dir``."""
    model_dir = Path(model_dir)
    if not is_exported(model_dir):
        raise UserError(f"{model_dir}: not an exported model directory (run esrerank export-onnx first)")
    scorer = scorer or ExportedScorer.from_dir(model_dir)
    if scorer.pairwise:
        raise UserError(f"{model_dir}: a cross-encoder has no vectors to search; the hybrid needs a "
                        "bi-encoder")
    # the evaluation's own preprocessing (evaluation/task_run.token_cache), so BM25 scores as it does
    queries = hybrid_dev_queries(dev, Preprocessor(TextOptions()), scorer, first_stage, corpus=corpus)
    if not queries:
        names = ", ".join(ds.name for ds in dev)
        raise UserError(f"the dev data ({names}) holds no duplicate pair to fit the hybrid on")
    fusion, report = fit_hybrid(queries, first_stage=first_stage, seed=seed)
    report["collection"] = len({q.id for q in corpus} | {q.id for ds in dev for p in ds.pairs
                                                         for q in (p.q1, p.q2)})
    path = model_dir / CONFIG
    config = json.loads(path.read_text(encoding="utf-8"))
    config["hybrid"] = fusion.model_dump(mode="json")
    config.setdefault("source", {}).setdefault("fusion", {})["hybrid"] = {
        "fusion": config["hybrid"], "report": report}
    parse_config(config, str(path))  # refuse to write what the sidecar would not read
    tmp = path.with_name(f".{CONFIG}.tmp")
    tmp.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    write_manifest(model_dir)
    return fusion, report
