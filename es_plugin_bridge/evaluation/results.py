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


@dataclass
class TaskResult:
    """All rankers of one task on one data set. ``notes`` tell what was dropped or skipped, and why.

    ``explain`` holds the ``fused`` ranker's per-candidate components when asked for (rerank
    ``--explain``); it is not part of the JSON contract.
    """

    task: str
    n_queries: int
    metric_names: list[str]
    rankers: dict[str, RankerResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    explain: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """``{"task", "n_queries", "rankers": {name: {metric: percent}}}``, exactly the contract's keys."""
        return {"task": self.task, "n_queries": self.n_queries,
                "rankers": {name: {m: percent(r.metrics[m]) for m in self.metric_names}
                            for name, r in self.rankers.items()}}
