"""Whether an exported graph gives a text the same output whatever shares its onnxruntime run.

A transformer's rows are not independent of their batch: in fp32 a row's last bits move with the
number of rows (measured on MiniLM: up to 1e-7), and onnxruntime's dynamic int8 quantisation scales
the activations by the whole run's range, padding included (up to 0.03 per component; after a sidecar
restart only 4.9 % of queries kept their top-10 order, issue 34). Static quantisation (constant scales)
would remove the second cause but not the first, and its per-tensor scales cost MiniLM's vectors too
much (cosine to torch 0.92 at worst on AskUbuntu, against the 0.95 ``--int8-tolerance`` allows).
So the export measures the dependence on the finished directory and records
``verification.encode``: ``per-text`` (one run per text, at its own length: its vector is a function
of the text alone) when any row moved, ``batched`` when none did (the papers' models).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving.model_dir import PER_TEXT, ModelDirectory

BATCHED = "batched"


def batch_dependence(model: ModelDirectory, questions: Sequence[Question], size: int = 16) -> float:
    """Max |Δ| between each text's output alone and inside a run with the other questions (runs of
    ``size`` rows in the given order, then in reverse: other mates, other positions, other padding)."""
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


def encode_mode(dependence: float) -> str:
    """``verification.encode`` for a measured dependence: any difference at all means one run per text."""
    return PER_TEXT if dependence > 0 else BATCHED


__all__ = ["BATCHED", "batch_dependence", "encode_mode"]
