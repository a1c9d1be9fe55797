"""Which encoder schedule gives a text the same output whatever shares its onnxruntime run.

A transformer's rows are not independent of their batch: in fp32 a row's last bits move with padding
and with a run of one row against more (measured on MiniLM: up to 6e-8), and onnxruntime's dynamic
int8 quantisation scales the activations by the whole run's range (up to 0.03 per component; after a
sidecar restart only 4.9 % of queries kept their top-10 order, issue 34). Measured on MiniLM, a row is
bit-identical in every run of two or more rows of its own length, fp32 and int8 with per-row
activation scales (``exporters.row_quantize``). So the export measures, on the finished directory,
the first schedule of ``serving.encode_schedule.SCHEDULES`` under which no row moved, and records it
in ``verification.encode``; the server checks it again where it loads the graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving.encode_schedule import PER_TEXT, SCHEDULES, Schedule
from es_plugin_bridge.serving.model_dir import ModelDirectory


def batch_dependence(model: ModelDirectory, questions: Sequence[Question], size: int = 16) -> float:
    """Max |Δ| between each text's output alone and inside a run with the other questions (runs of
    ``size`` rows in the given order, then in reverse: other mates, other positions, other padding):
    how much the graph itself depends on its batch, before any schedule."""
    encoded = model.inputs.encode(list(questions))
    if model.pairwise:
        sides = [model.inputs.side(e) for e in encoded]  # type: ignore[attr-defined]
        items: list = [(sides[i], sides[(i + 1) % len(sides)]) for i in range(len(sides))]

        def run(rows: Sequence) -> np.ndarray:
            return model.session.run([model.config.output], model.inputs.pair_feed(rows))[0]  # type: ignore[attr-defined]
    else:
        items = list(encoded)

        def run(rows: Sequence) -> np.ndarray:
            return model.session.run([model.config.output], model.inputs.feed(rows))[0]

    alone = np.concatenate([run([item]) for item in items])
    worst = 0.0
    for order in (list(range(len(items))), list(reversed(range(len(items))))):
        for start in range(0, len(order), size):
            rows = order[start : start + size]
            got = run([items[i] for i in rows])
            worst = max(worst, float(np.abs(got - alone[rows]).max()))
    return worst


def measured_schedule(model: ModelDirectory, questions: Sequence[Question]) -> Schedule:
    """The first schedule under which none of ``questions`` moved with what shared its run."""
    for schedule in SCHEDULES:
        if schedule == PER_TEXT or model.schedule_dependence(schedule, questions) == 0.0:
            return schedule
    raise AssertionError("per-text always holds")  # pragma: no cover


__all__ = ["batch_dependence", "measured_schedule"]
