"""The per-query results index: one document per (run, ranker, query), read by the Kibana dashboard.

``esrerank es evaluate`` turns its ``TaskResult`` into documents with ``results_documents`` and
indexes them with ``index_results``. Win/loss against BM25 and the per-query disagreement between
rankers are **precomputed** here (``delta_vs_bm25.<metric>``, ``outcome_vs_bm25``, ``disagreement``)
rather than left to Kibana: Lens cannot pair two documents of one query, and a precomputed field
keeps the dashboard, the HTML report (``evaluation.compare``) and the figures in one place.

This module imports neither Elasticsearch nor the evaluation code at import time, so the Kibana
saved-objects builder can read ``RESULTS_MAPPING`` in the slim serving image.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient
    from es_plugin_bridge.evaluation.results import TaskResult

RESULTS_INDEX_ENV = "ESRERANK_RESULTS_INDEX"
DEFAULT_RESULTS_INDEX = "esrerank-runs"
BASELINE = "bm25"
#: The mode of an in-process run; a run through a cluster is written under its registered mode.
NO_MODE = "none"

#: Every metric a task reports (docs/results.md), as written in the JSON; a test checks them against the
#: evaluation modules. ``threshold`` (classify) is a run-level figure, not a per-query one.
TASK_METRICS = {"rerank": ("map", "mrr", "p@1", "p@5", "p@10"),
                "retrieval": ("acc@1", "acc@5", "acc@10", "mrr@10"),
                "classify": ("accuracy",)}
OUTCOMES = ("win", "tie", "loss")


def metric_field(name: str) -> str:
    """A metric's field name in the index: ``p@1`` → ``p_at_1`` (``@`` is awkward in KQL and Lens)."""
    return name.replace("@", "_at_")


def results_index_name(explicit: str | None = None) -> str:
    """The results index: ``explicit``, else ``$ESRERANK_RESULTS_INDEX``, else ``esrerank-runs``."""
    return explicit or os.environ.get(RESULTS_INDEX_ENV) or DEFAULT_RESULTS_INDEX


def _metric_properties() -> dict[str, Any]:
    names = sorted({metric_field(m) for ms in TASK_METRICS.values() for m in ms})
    return {name: {"type": "float"} for name in names}


#: Settings and mappings of the results index. ``dynamic: strict`` so that a misspelt field fails the
#: bulk request instead of silently creating a field no dashboard reads; metrics added later still
#: map as floats through the dynamic template.
RESULTS_MAPPING: dict[str, Any] = {
    "settings": {"number_of_shards": 1, "auto_expand_replicas": "0-1"},
    "mappings": {
        "dynamic": "strict",
        "dynamic_templates": [
            {"metrics_as_float": {"path_match": "metrics.*", "mapping": {"type": "float"}}},
            {"deltas_as_float": {"path_match": "delta_vs_bm25.*", "mapping": {"type": "float"}}},
        ],
        "properties": {
            "@timestamp": {"type": "date"},
            "run_id": {"type": "keyword"},
            "task": {"type": "keyword"},
            "dataset": {"type": "keyword"},
            "engine": {"type": "keyword"},
            "mode": {"type": "keyword"},
            "ranker": {"type": "keyword"},
            "query_id": {"type": "keyword"},
            "rank_first_relevant": {"type": "integer"},
            "n_relevant": {"type": "integer"},
            "primary_metric": {"type": "keyword"},
            "score": {"type": "float"},
            "metrics": {"dynamic": True, "properties": _metric_properties()},
            "delta_vs_bm25": {"dynamic": True, "properties": _metric_properties()},
            "outcome_vs_bm25": {"type": "keyword"},
            "disagreement": {"type": "float"},
        },
    },
}


def mapped_fields(mapping: Mapping[str, Any] = RESULTS_MAPPING) -> dict[str, str]:
    """Every leaf field of a mapping as ``{dotted.name: type}`` (objects are walked, not listed)."""
    out: dict[str, str] = {}

    def walk(properties: Mapping[str, Any], prefix: str) -> None:
        for name, spec in properties.items():
            if "properties" in spec:
                walk(spec["properties"], f"{prefix}{name}.")
            else:
                out[f"{prefix}{name}"] = spec["type"]

    walk(mapping["mappings"]["properties"], "")
    return out


def results_run_id(task_result: TaskResult, *, dataset: str, engine: str, mode: str,
                   now: datetime | None = None) -> str:
    """A readable, unique run id: ``20250101T120000Z-rerank-elasticsearch-native-1a2b3c``.

    The suffix hashes the data set, the rankers and the exact time, so two runs started in the same
    second on different data still get different ids."""
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    digest = hashlib.sha1("\t".join([dataset, ",".join(task_result.rankers), now.isoformat()]).encode())
    return f"{now:%Y%m%dT%H%M%SZ}-{task_result.task}-{engine}-{mode}-{digest.hexdigest()[:6]}"


def _check(engine: str, mode: str) -> None:
    from es_plugin_bridge.engines.registry import engine_names  # the registered engines are the valid ones

    engines = engine_names()
    if engine not in engines:
        raise UserError(f"results: engine {engine!r} is not one of {', '.join(engines)}")
    from es_plugin_bridge.elastic.modes import mode_names

    modes = (*mode_names(), NO_MODE)
    if mode not in modes:
        raise UserError(f"results: mode {mode!r} is not one of {', '.join(modes)}")


def results_documents(task_result: TaskResult, *, run_id: str, dataset: str, engine: str, mode: str,
                      timestamp: datetime | None = None, baseline: str = BASELINE) -> list[dict[str, Any]]:
    """One document per (ranker, query) of ``task_result``, in the shape of ``RESULTS_MAPPING``.

    Metrics are in percent (as in the JSON). ``delta_vs_bm25`` (ranker − BM25 on the same query, per
    metric), ``outcome_vs_bm25`` (win/tie/loss on the task's primary metric) are present on every
    ranker but the baseline itself, and only when the run has a ``bm25`` ranker; ``disagreement`` is
    the spread (max − min) of the primary metric across the run's rankers on that query.
    """
    from es_plugin_bridge.evaluation.compare import per_query_table

    _check(engine, mode)
    when = (timestamp or datetime.now(timezone.utc)).astimezone(timezone.utc)
    stamp = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    table = per_query_table(task_result)
    primary = table.primary  # the metric that decides a win, a loss or a tie (MAP for rerank)
    has_baseline = baseline in task_result.rankers
    docs = []
    for name, ranker in task_result.rankers.items():
        for record in ranker.per_query:
            qid = str(record["query_id"])
            metrics = record["metrics"]
            doc: dict[str, Any] = {
                "@timestamp": stamp, "run_id": run_id, "task": task_result.task, "dataset": dataset,
                "engine": engine, "mode": mode, "ranker": name, "query_id": qid,
                "rank_first_relevant": record.get("rank_first_relevant"),
                "n_relevant": _n_relevant(task_result.task, record),
                "metrics": {metric_field(m): float(v) for m, v in metrics.items()},
            }
            if primary in metrics:
                doc["primary_metric"] = metric_field(primary)
                doc["score"] = float(metrics[primary])
                doc["disagreement"] = table.spread(qid)
            if has_baseline and name != baseline:
                base = table.metrics(baseline, qid)
                doc["delta_vs_bm25"] = {metric_field(m): round(float(v) - float(base[m]), 4)
                                        for m, v in metrics.items() if m in base}
                if primary in metrics:
                    doc["outcome_vs_bm25"] = table.outcome(name, baseline, qid)
            docs.append(doc)
    return docs


def _n_relevant(task: str, record: Mapping[str, Any]) -> int | None:
    if record.get("n_relevant") is not None:
        return int(record["n_relevant"])
    if task == "retrieval":
        return 1  # one relevant question per query (the pair's duplicate)
    if task == "classify" and record.get("label") is not None:
        return int(record["label"] > 0)
    return None


def results_doc_id(doc: Mapping[str, Any]) -> str:
    """The document id: re-indexing the same run replaces its documents instead of doubling them."""
    return f"{doc['run_id']}:{doc['ranker']}:{doc['query_id']}"


def ensure_results_index(client: SearchClient, index: str) -> bool:
    """Create the results index with ``RESULTS_MAPPING`` unless it exists; True when it was created."""
    if client.indices.exists(index=index):
        return False
    client.indices.create(index=index, settings=RESULTS_MAPPING["settings"],
                          mappings=RESULTS_MAPPING["mappings"])
    return True


def index_results(client: SearchClient, index: str, docs: Sequence[Mapping[str,
                  Any]] | Iterable[Mapping[str, Any]],
                  *, refresh: bool = True) -> tuple[int, list[dict[str, Any]]]:
    """Bulk-index ``docs`` (creating the index first when missing): ``(indexed, errors)``.

    Errors are returned, not raised, so the caller can report every failed document by id."""
    ensure_results_index(client, index)
    actions = ({"_op_type": "index", "_index": index, "_id": results_doc_id(doc), "_source": dict(doc)}
               for doc in docs)
    # OpenSearch's client brings opensearch-py's bulk helper (the same arguments as elasticsearch-py's).
    bulk = getattr(client, "bulk_helper", None)
    if bulk is None:
        from elasticsearch import helpers

        bulk = helpers.bulk
    indexed, errors = bulk(client, actions, raise_on_error=False, raise_on_exception=False,
                           refresh="wait_for" if refresh else False)
    return int(indexed), list(errors) if isinstance(errors, list) else []
