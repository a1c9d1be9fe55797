"""``es index``'s run: who embeds (nobody for an index without vectors, the cluster's ingest pipeline, or
this client through the sidecar), the bulk requests, the refresh, and the one line that says why a run
did not index everything."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.data.types import Question


@dataclass
class IndexRun:
    """What the run did: the bulk report and, when it did not index everything, the one-line error."""

    report: Any
    error: str | None = None


def index_run(client: Any, index: str, questions: Sequence[Question], sidecar: SidecarTarget, *,
              batch_size: int, resume: bool, max_retries: int, progress: bool,
              note: Callable[[str], None] = lambda line: None) -> IndexRun:
    """Index ``questions`` into ``index`` (made by ``es setup``) with what its meta says it holds."""
    from es_plugin_bridge.elastic.bulk import index_questions
    from es_plugin_bridge.elastic.connection import call
    from es_plugin_bridge.elastic.engine import open_engine
    from es_plugin_bridge.elastic.opensearch_ingest import ingest_stop_rule
    from es_plugin_bridge.elastic.setup import read_meta
    from es_plugin_bridge.elastic.sidecar_embedder import SidecarEmbedder
    from es_plugin_bridge.engines.registry import EngineContext
    from es_plugin_bridge.text import Preprocessor

    meta = read_meta(client, index)
    embed = None
    stop_on, explain = None, None  # the ingest embedding's: when to stop, how to say why
    if meta.no_vectors_reason is not None:  # a pairwise model or --no-vectors: no /v1/embed call at all
        note(f"index {index} holds no vectors ({meta.no_vectors_reason}): indexing the text only")
    elif meta.embedding.get("pipeline"):
        note(f"the cluster embeds through pipeline {meta.embedding['pipeline']}")
        stop_on, explain = ingest_stop_rule(client)
    else:
        embedder = SidecarEmbedder.reaching(sidecar, timeout=max(sidecar.timeout, 60.0))
        embedder.ready()
        embed = embedder.embed
    engine = open_engine(EngineContext(tokens=Preprocessor(meta.text_options()).tokens, options={
        "client": client, "index": index, "embed": embed, "neural_similarity": meta.neural_similarity}))
    report = index_questions(client, index, list(questions), engine.actions, batch_size=batch_size,
                             resume=resume, max_retries=max_retries, progress=progress, stop_on=stop_on)
    call(f"refreshing {index}", client.indices.refresh, index=index)
    run = IndexRun(report)
    if not report.ok:
        why = explain(meta.embedding, [f.reason for f in report.failures], report.failed) if explain else None
        generic = f"{report.failed} questions were not indexed; fix the cause and re-run with --resume"
        run.error = why or generic
    return run
