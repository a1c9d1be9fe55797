"""``es index``'s run: who embeds (nobody for an index without vectors, the cluster's ingest pipeline, or
this client through the sidecar), the bulk requests, the refresh, and the one line that says why a run
did not index everything.

Whatever stops a run (a question the sidecar refuses, the sidecar or the cluster gone, Ctrl-C), it
ends with its report: what was stored, and each question that was not, with its reason."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient


@dataclass
class IndexRun:
    """What the run did: the bulk report and, when it did not index everything, the one-line error."""

    report: Any
    error: str | None = None

    @property
    def interrupted(self) -> bool:
        """Ctrl-C stopped the run (its report is still complete up to there)."""
        return bool(self.report.interrupted)


def index_run(client: SearchClient, index: str, questions: Sequence[Question], sidecar: SidecarTarget, *,
              batch_size: int, resume: bool, max_retries: int, progress: bool,
              note: Callable[[str], None] = lambda line: None, vectors: Path | None = None,
              ahead: int = 1) -> IndexRun:
    """Index ``questions`` into ``index`` (made by ``es setup``) with what its meta says it holds.

    ``vectors``: a file of ``esrerank embed`` to take the vectors and terms from instead of the sidecar
    (refused in one line when another model made it; a question it lacks fails alone). ``ahead``: batches
    embedded while the cluster stores the one before (``bulk.index_questions``; 0: one after the other)."""
    from es_plugin_bridge.bridge.sidecar_client import SidecarClient
    from es_plugin_bridge.elastic.bulk import index_questions
    from es_plugin_bridge.elastic.engine import open_engine
    from es_plugin_bridge.elastic.opensearch_ingest import ingest_stop_rule, refused_by_sidecar
    from es_plugin_bridge.elastic.setup import read_meta
    from es_plugin_bridge.engines.registry import EngineContext
    from es_plugin_bridge.text import Preprocessor
    from es_plugin_bridge.text.sidecar_text import sidecar_refusal

    meta = read_meta(client, index)
    if vectors is not None and (meta.no_vectors_reason is not None or meta.embedding.get("pipeline")):
        why = (meta.no_vectors_reason
               or f"the cluster embeds at ingest (pipeline {meta.embedding['pipeline']})")
        raise UserError(f"--vectors: index {index} stores no vectors from the client: {why}")
    embed = None
    stop_on, explain, item_refused = None, None, None  # the ingest embedding's: when to stop, how to say why
    if meta.no_vectors_reason is not None:  # a pairwise model or --no-vectors: no /v1/embed call at all
        note(f"index {index} holds no vectors ({meta.no_vectors_reason}): indexing the text only")
    elif meta.embedding.get("pipeline"):
        note(f"the cluster embeds through pipeline {meta.embedding['pipeline']}")
        stop_on, explain = ingest_stop_rule(client)
        item_refused = refused_by_sidecar if stop_on is not None else None  # OpenSearch's processors
    elif vectors is not None:
        embed = _from_file(vectors, meta, index, note)
    else:
        embedder = SidecarClient.reaching(sidecar, timeout=max(sidecar.timeout, 60.0))
        embedder.ready()
        embed = embedder.embed
    engine = open_engine(EngineContext(tokens=Preprocessor(meta.text_options()).tokens, options={
        "client": client, "index": index, "embed": embed, "neural_similarity": meta.neural_similarity}))
    report = index_questions(
        client, index, list(questions), engine.actions, batch_size=batch_size, resume=resume,
        max_retries=max_retries, progress=progress, stop_on=stop_on, item_refused=item_refused,
        batch_refused=_refused_a_question, ahead=ahead,
        refusal=sidecar_refusal if embed is not None and vectors is None else None)  # the sidecar embeds
    run = IndexRun(report)
    refreshed = _refresh(client, index)
    if not report.ok:
        why = explain(meta.embedding, [f.reason for f in report.failures], report.failed) if explain else None
        run.error = why or _generic_error(report)
    if refreshed is not None:
        run.error = f"{run.error}; {refreshed}" if run.error else refreshed
    return run


def _refused_a_question(exc: Exception) -> bool:
    """A batch failed for some of its questions (the sidecar refused a text, or the vectors file lacks a
    question): split it until each such question fails alone."""
    from es_plugin_bridge.bridge.sidecar_client import EmbedError
    from es_plugin_bridge.elastic.vectors_file import MissingVector

    return isinstance(exc, MissingVector) or (isinstance(exc, EmbedError) and exc.refused_a_text)


def _from_file(path: Path, meta: Any, index: str, note: Callable[[str], None]
               ) -> Callable[[Sequence[Question]], list[dict[str, Any]]]:
    """The embedder of a vectors file, checked against the index's model (its manifest where recorded)."""
    from es_plugin_bridge.elastic.vectors_file import read_vectors

    vectors = read_vectors(path)
    vectors.check_model(meta.model_type, meta.dimension, meta.manifest_sha256, index)
    if meta.manifest_sha256 is None:
        note(f"index {index} records no model manifest (set up before esrerank recorded it): {path} is "
             "checked by model type and dimension only")
    note(f"vectors and terms from {path} ({len(vectors)} questions, {vectors.header.model}): the sidecar is "
         "not called")
    return functools.partial(vectors.embed, cosine=meta.neural_similarity == "cosine")


def _refresh(client: SearchClient, index: str) -> str | None:
    """Refresh ``index`` so searches see the run at once; why it could not (the cluster gone), or None:
    the run's report still stands, so a failed refresh must not replace it."""
    from es_plugin_bridge.elastic.cluster.connection import call

    try:
        call(f"refreshing {index}", client.indices.refresh, index=index)
    except UserError as exc:
        return (f"{exc} (the counts above are what the cluster acknowledged; its next refresh shows them, "
                "and --resume checks each id)")
    return None


def _generic_error(report: Any) -> str:
    """The error line of a run that did not store everything, where no rule of its engine says more."""
    failed = "1 question was" if report.failed == 1 else f"{report.failed} questions were"
    if report.interrupted:
        return f"interrupted: {failed} not indexed; re-run with --resume"
    if report.aborted:
        return f"{failed} not indexed and the run stopped early; re-run with --resume"
    return (f"{failed} not indexed (each listed above with its reason; the rest are stored); fix them and "
            "re-run with --resume, which sends only what is not stored")
