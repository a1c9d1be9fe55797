"""The result of one evaluation run and its JSON form (a contract: docs/architecture.md, "Contracts")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def percent(value: float) -> float:
    """A fraction as a percentage rounded to 2 decimals, the unit of every reported metric."""
    return round(100.0 * float(value), 2)


@dataclass
class RankerResult:
    """Aggregated metrics (fractions; ``threshold`` on the scorer's scale) and per-query records."""

    metrics: dict[str, float]
    per_query: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    #: Wall seconds of each query's ranking, in ``per_query`` order, where the task timed them (the review
    #: page's p50/p95; not in the per-query JSONL, whose fields the results index maps).
    latencies: list[float] = field(default_factory=list)


@dataclass
class TaskResult:
    """All rankers of one task on one data set. ``notes`` tell what was dropped or skipped, and why.

    ``explain`` holds the ``fused`` ranker's per-candidate components when asked for (rerank
    ``--explain``); it is not part of the JSON contract. ``computed_by`` (``es evaluate`` only) says
    where each ranker ran: ``engine`` (through the cluster), ``in process`` (this process, although the
    run went through a cluster), ``data`` (the data's own order); the JSON and the table carry it, so a
    figure computed in process is never read as the engine's.
    """

    task: str
    n_queries: int
    metric_names: list[str]
    rankers: dict[str, RankerResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    explain: list[dict[str, Any]] = field(default_factory=list)
    computed_by: dict[str, str] = field(default_factory=dict)
    #: For the review page (``evaluation.review_data``), not the JSON contract: each query's and
    #: candidate's title by id, each query's relevant ids and its judged ids, and where the inputs came
    #: from (``command``, ``model``: the model manifest's sha256).
    texts: dict[str, str] = field(default_factory=dict)
    judgments: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)
    #: ``es evaluate`` only: the mode against the in-process ranker it must equal, query by query
    #: (``elastic/parity.py``), and what the mode's searches cost (``p50_ms``, ``p95_ms``,
    #: ``requests_per_search`` by target), each keyed by the ranker the mode gives.
    parity: dict[str, dict[str, Any]] = field(default_factory=dict)
    cost: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """``{"task", "n_queries", "rankers": {name: {metric: percent}}}``, the contract's keys, then
        ``computed_by``, ``parity`` and ``cost`` where a run went through a cluster."""
        data: dict[str, Any] = {"task": self.task, "n_queries": self.n_queries,
                                "rankers": {name: {m: percent(r.metrics[m]) for m in self.metric_names}
                                            for name, r in self.rankers.items()}}
        if self.computed_by:
            data["computed_by"] = dict(self.computed_by)
        if self.parity:
            data["parity"] = dict(self.parity)
        if self.cost:
            data["cost"] = dict(self.cost)
        return data

    def label(self, name: str) -> str:
        """A ranker's name as the table shows it: ``model (in process)`` where a cluster run computed it
        here."""
        where = self.computed_by.get(name)
        return f"{name} ({where})" if where == "in process" else name
