"""Shared plumbing of the three tasks: build each ranker, time it, collect its result."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from es_plugin_bridge import rankers as registry
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.evaluation.results import RankerResult, TaskResult
from es_plugin_bridge.rankers import Ranker, RankerContext, TokenCache


def run_rankers(task: TaskResult, names: Sequence[str], collection: Sequence[Question], tokens: TokenCache,
                evaluate_one: Callable[[str, Ranker], RankerResult], *, model_dir: Path | None = None,
                params: Mapping[str, Mapping[str, float]] | None = None,
                context_options: Mapping[str, Any] | None = None) -> TaskResult:
    """Check every ranker name first (no work is wasted on a typo), then build and evaluate each.

    ``context_options`` are more ``RankerContext`` fields (``engine``, ``overrides``,
    ``fused_first_stage``): how the run's rankers are computed, not what is measured.
    """
    registry.check(names, task.task, has_model=model_dir is not None)
    context = RankerContext(collection=collection, tokens=tokens, model_dir=model_dir, params=params or {},
                            **dict(context_options or {}))
    for name in names:
        start = time.perf_counter()
        result = evaluate_one(name, registry.build(name, context))
        result.seconds = time.perf_counter() - start
        task.rankers[name] = result
    return task
