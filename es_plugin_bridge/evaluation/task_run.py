"""One evaluation run from data specs: each spec read once, the run's engine built by its registered name,
the task evaluated. What ``esrerank evaluate`` and the demo run; the CLI only parses and prints."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Dataset
from es_plugin_bridge.engines.base import Engine
from es_plugin_bridge.engines.registry import EngineContext, build_engine
from es_plugin_bridge.evaluation.classify import evaluate_classify
from es_plugin_bridge.evaluation.rerank import evaluate_rerank
from es_plugin_bridge.evaluation.results import TaskResult
from es_plugin_bridge.evaluation.retrieval import RetrievalProtocol, evaluate_retrieval, protocol_queries
from es_plugin_bridge.rankers import TokenCache
from es_plugin_bridge.text import Preprocessor, TextOptions

__all__ = ["RunEngine", "SpecReader", "run_task"]


@dataclass(frozen=True)
class RunEngine:
    """The run's first-stage engine by registered name, built from the run's token cache; what it creates
    for the run (a server's throw-away index) is removed when ``cleanup`` closes."""

    name: str
    cleanup: ExitStack
    params: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    progress: bool = True
    options: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, tokens: TokenCache) -> Engine:
        context = EngineContext(tokens=tokens, params=self.params, progress=self.progress,
                                cleanup=self.cleanup, options=self.options)
        return build_engine(self.name, context)


class SpecReader:
    """Reads each data spec once; what ``--skip-bad`` skipped becomes a note of the result."""

    def __init__(self, skip_bad: bool) -> None:
        self.skip_bad = skip_bad
        self.notes: list[str] = []
        self._read: dict[str, Dataset] = {}

    def __call__(self, spec: str | None) -> Dataset:
        if spec is None:  # the CLI checks each task's required specs; a library caller gets told too
            raise ValueError("a data spec is required for this task")
        if spec not in self._read:
            self._read[spec] = dataset = read_spec(spec, skip_bad=self.skip_bad)
            if dataset.skipped:
                self.notes.append(f"{spec}: skipped {dataset.skipped} malformed records (--skip-bad)")
        return self._read[spec]


def token_cache(body_words: int | None = None, title_only: bool = False) -> TokenCache:
    """The run's preprocessing: bodies cut at ``body_words`` (default 100), or titles only."""
    options: dict[str, Any] = {}
    if body_words is not None:
        options["body_words"] = body_words
    if title_only:
        options["use_body"] = False
    return TokenCache(Preprocessor(TextOptions(**options)))


def run_task(task: str, names: Sequence[str], *, data_spec: str | None = None,
             queries_spec: str | None = None, corpus_specs: Sequence[str] = (), dev_spec: str | None = None,
             model_dir: Path | None = None, params: dict[str, dict[str, float]] | None = None,
             drop_no_relevant: bool = False, max_queries: int | None = None, body_words: int | None = None,
             relevant: str = "pair", queries_from: str = "q1",
             title_only: bool = False, skip_bad: bool = False, show_progress: bool = True,
             explain: bool = False, engine_factory: Callable[[TokenCache], Any] | None = None,
             context_options: dict[str, Any] | None = None) -> TaskResult:
    """Read the specs, then run the task's evaluation.

    ``explain`` (rerank only) fills ``TaskResult.explain`` from the run's own ``fused`` ranker.
    ``engine_factory`` makes the first-stage engine from the run's token cache (e.g. :class:`RunEngine`;
    default: the registry's default engine, embedded); ``context_options`` are more ``RankerContext``
    fields (e.g. ``fused_first_stage``, ``overrides``)."""
    tokens = token_cache(body_words, title_only)
    read = SpecReader(skip_bad)
    context = dict(context_options or {})
    if engine_factory is not None:
        context["engine"] = engine_factory(tokens)
    common = {"model_dir": model_dir, "params": params, "show_progress": show_progress,
              "context_options": context}
    if task == "rerank":
        result = evaluate_rerank(read(data_spec).queries, names, tokens, drop_no_relevant=drop_no_relevant,
                                 explain=explain, **common)
    elif task == "retrieval":
        protocol = RetrievalProtocol(relevant=relevant, queries_from=queries_from)
        result = _retrieval(read, queries_spec, corpus_specs, protocol, max_queries, names, tokens, common)
    else:
        result = evaluate_classify(read(data_spec).pairs, read(dev_spec).pairs, names, tokens, **common)
    result.notes[:0] = read.notes
    manifest = model_dir / "manifest.json" if model_dir is not None else None
    if manifest is not None and manifest.is_file():
        import hashlib

        result.inputs["model"] = hashlib.sha256(manifest.read_bytes()).hexdigest()
    return result


def _retrieval(read: SpecReader, queries_spec: str | None, corpus_specs: Sequence[str],
               protocol: RetrievalProtocol, max_queries: int | None, names: Sequence[str], tokens: TokenCache,
               common: dict[str, Any]) -> TaskResult:
    """The retrieval task: the queries file's pairs search its questions plus every corpus file's."""
    queries_data = read(queries_spec)
    links = [queries_data.pairs] + [read(spec).pairs for spec in corpus_specs]
    queries, notes = protocol_queries(queries_data.pairs, links, protocol, max_queries=max_queries,
                                      source=queries_spec or "queries")
    read.notes.extend(notes)
    documents = [q for spec in corpus_specs for q in read(spec).questions.values()]
    documents += list(queries_data.questions.values())
    return evaluate_retrieval(documents, queries, names, tokens, protocol=protocol, **common)
