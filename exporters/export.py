"""Checkpoint directory → model directory, verified, written atomically.

Steps: load the checkpoint (any defect → one UserError naming the file); export the encoder to
ONNX and compare it with torch on real questions (see ``onnx_graph``); write the vocabulary, the
BOW weights (plain float32 ``.npy``), config.json and manifest.json into a temporary directory
next to ``out``; load that directory the way the server will (manifest check included) and
compare its ``neural``/``bow``/``model`` scores with ``NeuralScorer``; only then rename it to
``out``. A failure at any step leaves ``out`` untouched.

What differs between model families (the graph's inputs, its wrapper and probes, extra files such as
a transformer's ``tokenizer.json``) comes from the checkpoint's family (``training.families``); the rest
of the directory is the same for all. ``quantize="int8"`` replaces the
verified fp32 graph by onnxruntime's dynamic int8 quantisation, checked against torch with
``int8_tolerance`` (its differences are quantisation error, not export error) and recorded in
config.json's ``verification.quantized`` and ``.quantization`` (``dynamic``: activation scales per
onnxruntime run). Last, ``batch_check`` measures whether a text's output moves with what shares its
run and records ``verification.encode`` (``per-text`` for transformers, fp32 and int8): the server
then runs each text alone, so the same text always gets the same vector, bit for bit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime
import torch
from safetensors import SafetensorError

import es_plugin_bridge
from es_plugin_bridge.core.hybrid_fusion import HybridFusion
from es_plugin_bridge.core.manifest import write_manifest
from es_plugin_bridge.core.model_config import (
    ENCODER_OUTPUT,
    FORMAT,
    FORMAT_VERSION,
    Beta,
    ExportedConfig,
    Verification,
)
from es_plugin_bridge.data.types import Dataset, Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models import QuestionSimilarityModel
from es_plugin_bridge.serving.encode_schedule import ALONE_FROM, LENGTH_BUCKETS
from es_plugin_bridge.serving.model_dir import BOW_WEIGHTS, CONFIG, ENCODER, VOCAB, ModelDirectory
from es_plugin_bridge.training import checkpoint as ckpt
from es_plugin_bridge.training.families import ModelFamily, family_of
from es_plugin_bridge.training.featurize import Featurizer
from es_plugin_bridge.training.torch_scorer import NeuralScorer
from exporters.batch_check import batch_dependence, measured_schedule
from exporters.onnx_graph import OPSET, QUANTIZATION, checks_for, compare, export_verified, quantize_int8

SAMPLES = Path(es_plugin_bridge.__file__).parent / "samples"
TRAIN_SUMMARY = ("best_dev_map", "best_epoch", "seconds")
DEFAULT_VERIFY_SPECS = (
    f"semeval:{SAMPLES / 'semeval2016-task3' / 'SemEval2016-Task3-CQA-QL-dev.xml'}",
    f"pairs:{SAMPLES / 'askubuntu-pairs' / 'val.tsv'}",
)


@dataclass
class ExportResult:
    """What was written and what the verification measured."""

    out: Path
    model_type: str
    dynamic_length: bool
    max_abs_diff: float
    score_max_abs_diff: float
    seconds: float
    files: dict[str, int] = field(default_factory=dict)
    quantized: str | None = None


def load_source(directory: Path) -> tuple[QuestionSimilarityModel, Featurizer, dict[str, Any]]:
    """``load_checkpoint`` with every failure turned into a UserError naming the file."""
    directory = Path(directory)
    try:
        model, featurizer, config = ckpt.load_checkpoint(directory)
    except UserError:
        raise
    except SafetensorError as exc:
        raise UserError(f"{directory / ckpt.WEIGHTS}: not a valid safetensors file ({exc})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{directory / ckpt.CONFIG}: incomplete or invalid checkpoint ({exc!r})") from None
    for name, value in model.state_dict().items():
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise UserError(f"{directory / ckpt.WEIGHTS}: weight {name!r} holds NaN or infinite values")
    return model, featurizer, config


def _dataset_questions(ds: Dataset) -> list[Question]:
    found = list(ds.questions.values())
    found += [q for p in ds.pairs for q in (p.q1, p.q2)]
    found += [q for rq in ds.queries for q in (rq.query, *rq.candidates)]
    return found


def verification_questions(specs: Sequence[str] | None = None, limit: int = 64) -> list[Question]:
    """Real questions to compare ONNX with torch: from ``specs`` (FORMAT:PATH) or the shipped samples.

    Half from each source when several are given, distinct ids, plus one empty question (an
    all-padding row must encode the same way too).
    """
    from es_plugin_bridge.data.spec import read_spec

    sources = [_dataset_questions(read_spec(spec)) for spec in (specs or DEFAULT_VERIFY_SPECS)]
    share = max(1, limit // len(sources))
    chosen: dict[str, Question] = {}
    for found in sources:
        before = len(chosen)
        for q in found:
            if len(chosen) - before >= share:
                break
            chosen.setdefault(q.id, q)
    if not chosen:
        raise UserError(f"no questions to verify the export with in {', '.join(specs or ())}")
    return [*chosen.values(), Question("export-check#empty", "", "")]


def check_target(out: Path, checkpoint: Path, force: bool) -> None:
    """Refuse an ``out`` that is a file, a non-empty directory (unless ``force``) or holds the checkpoint."""
    out, source = Path(out).resolve(), Path(checkpoint).resolve()
    if out == source or out in source.parents:
        raise UserError(f"--out {out} would replace the checkpoint {source}; choose another directory")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(f"--out {out} exists and is not empty; use --force to replace it")


def _install(tmp: Path, out: Path) -> None:
    """Rename the finished directory into place; an existing ``out`` is swapped out, then removed."""
    if not out.exists():
        os.rename(tmp, out)
        return
    old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _config(
    family: ModelFamily,
    model: QuestionSimilarityModel,
    featurizer: Featurizer,
    source: dict[str, Any],
    checkpoint: Path,
    dynamic: bool,
    verification: Verification,
) -> ExportedConfig:
    own = family.exported_config(model)
    fusion = source.get("fusion") or {}
    calibration = {name: fit["calibration"] for name, fit in fusion.get("first_stages", {}).items()
                   if fit.get("calibration")}
    if fusion.get("model_calibration"):
        calibration["model"] = fusion["model_calibration"]
    beta = Beta(
        model=tuple(float(x) for x in model.beta.detach()) if model.beta is not None else None,
        fusion={name: dict(fit["weights"]) for name, fit in fusion.get("first_stages", {}).items()},
        fusion_default=fusion.get("default"),
        calibration={name: (float(a), float(b)) for name, (a, b) in calibration.items()},
    )
    return ExportedConfig(
        format=FORMAT,
        format_version=FORMAT_VERSION,
        model_type=model.model_type,
        similarity=model.similarity,
        dimension=model.output_dim,
        vocab_size=len(featurizer.vocab),
        max_title=featurizer.max_title,
        max_body=featurizer.max_body,
        dynamic_length=dynamic,
        inputs=own["inputs"],
        tokenizer=own["tokenizer"],
        hybrid=HybridFusion(**fusion["hybrid"]["fusion"]) if fusion.get("hybrid") else None,
        output=ENCODER_OUTPUT,
        opset=OPSET,
        text=featurizer.preprocessor.options.model_dump(mode="json"),
        beta=beta,
        bow_weights="learned" if model.bow is not None else "idf",
        versions={
            "es_plugin_bridge": es_plugin_bridge.__version__,
            "torch": torch.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
            "numpy": np.__version__,
            **own["versions"],
        },
        verification=verification,
        model=source.get("model", {}),
        source={
            # which checkpoint, without the machine's path (a model directory is shipped to other hosts):
            # its folder's name and the sha256 of its config.json
            "checkpoint": {"name": Path(checkpoint).resolve().name,
                           "config_sha256": hashlib.sha256((Path(checkpoint) / "config.json").read_bytes())
                           .hexdigest()},
            "fusion": fusion,
            "train": {k: v for k, v in (source.get("train") or {}).items() if k in TRAIN_SUMMARY},
        },
    )


def _write_config(directory: Path, config: ExportedConfig) -> None:
    text = json.dumps(config.model_dump(mode="json"), indent=2, sort_keys=True)
    (directory / CONFIG).write_text(text + "\n", encoding="utf-8")


def compare_scores(scorer: NeuralScorer, exported: ModelDirectory, questions: list[Question]) -> float:
    """Max |exported − torch| over the neural, bow and model scores of a few real queries."""
    worst = 0.0
    docs = questions[4:28]
    for query in questions[:4]:
        expected = scorer.components(query, docs)
        got = exported.rerank(query, docs)
        for name, values in expected.items():
            worst = max(worst, float(np.abs(got[name] - values).max()))
    return worst


def export_checkpoint(
    checkpoint: Path,
    out: Path,
    *,
    force: bool = False,
    verify_specs: Sequence[str] | None = None,
    tolerance: float = 1e-4,
    max_questions: int = 64,
    quantize: str | None = None,
    int8_tolerance: float = 0.05,
) -> ExportResult:
    """Export ``checkpoint`` to the model directory ``out`` (see the module docstring)."""
    started = time.monotonic()
    checkpoint, out = Path(checkpoint), Path(out)
    check_target(out, checkpoint, force)
    model, featurizer, source = load_source(checkpoint)
    questions = verification_questions(verify_specs, max_questions)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.export-"))
    try:
        family = family_of(model.model_type)
        dynamic, diffs = export_verified(family, model, featurizer, questions, tmp / ENCODER, tolerance)
        family.export_files(model, tmp)
        extra: dict[str, Any] = {}
        if quantize is not None:
            if quantize != "int8":
                raise UserError(f"--quantize {quantize!r}: only int8 is supported")
            quantize_int8(tmp / ENCODER)
            fp32 = max(diffs.values())
            measure = family.quantized_measure
            diffs = compare(family, model, featurizer, tmp / ENCODER, checks_for(family, questions, dynamic),
                            measure=measure)
            extra = {"quantized": "int8", "quantization": QUANTIZATION, "fp32_max_abs_diff": fp32,
                     "measure": measure}
            tolerance = int8_tolerance
            if not max(diffs.values()) <= tolerance:
                what = "vectors differ from torch's by 1 − cosine" if measure == "cosine" else \
                    "outputs differ from torch's by max |Δ|"
                raise UserError(f"the int8 encoder's {what} = "
                                f"{max(diffs.values()):.3g} > {tolerance:g} (--int8-tolerance); "
                                "nothing was written")
        featurizer.vocab.save(tmp / VOCAB)
        weights = NeuralScorer(model, featurizer).bow_weights.astype(np.float32)
        np.save(tmp / BOW_WEIGHTS, weights, allow_pickle=False)
        verification = Verification(
            questions=len(questions), tolerance=tolerance, max_abs_diff=max(diffs.values()), probes=diffs,
            **extra,
        )
        _write_config(tmp, _config(family, model, featurizer, source, checkpoint, dynamic, verification))
        write_manifest(tmp)
        # How the server must run the graph so that a text's vector depends on that text alone
        # (``batch_check``): measured on the directory as it will be served, then recorded.
        served = ModelDirectory.load(tmp, threads=1)
        schedule = measured_schedule(served, questions)
        verification = verification.model_copy(update={
            "batch_max_abs_diff": batch_dependence(served, questions), "encode": schedule,
            "alone_from": ALONE_FROM if schedule == LENGTH_BUCKETS else None})
        _write_config(tmp, _config(family, model, featurizer, source, checkpoint, dynamic, verification))
        write_manifest(tmp)
        exported = ModelDirectory.load(tmp, threads=1)
        score_diff = compare_scores(NeuralScorer(model, featurizer), exported, questions)
        if not score_diff <= tolerance:
            raise UserError(
                f"the exported directory's scores differ from torch by {score_diff:.3g} > {tolerance:g}; "
                "nothing was written"
            )
        verification = verification.model_copy(update={"score_max_abs_diff": score_diff})
        _write_config(tmp, _config(family, model, featurizer, source, checkpoint, dynamic, verification))
        write_manifest(tmp)
        for path in tmp.iterdir():  # mkstemp made some files private; the server may be another user
            path.chmod(0o644)
        tmp.chmod(0o755)
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir())}
        _install(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportResult(
        out=out,
        model_type=model.model_type,
        dynamic_length=dynamic,
        max_abs_diff=verification.max_abs_diff,
        score_max_abs_diff=score_diff,
        seconds=time.monotonic() - started,
        files=files,
        quantized=quantize,
    )


__all__ = ["ExportResult", "check_target", "export_checkpoint", "load_source",
           "verification_questions"]
