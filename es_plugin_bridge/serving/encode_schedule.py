"""Which texts share an onnxruntime run: the encoder's schedule, decided here and nowhere else.

A text's vector must be a function of the text alone (the same question, the same ranking, whatever
request it came in with). Three schedules, recorded by the export in ``verification.encode``
(``exporters.batch_check`` measures which one holds for the finished directory):

- ``batched``: rows do not depend on their batch-mates (the papers' models): up to ``batch_size`` rows a
  run, length-sorted beyond it so that each run pads to its own longest row.
- ``length-buckets``: a transformer's rows move with padding and with a run of one row against more
  (fp32 in the last bits; onnxruntime's per-run int8 activation scale by up to 0.03), but measured on
  MiniLM, fp32 and per-row int8, a row is bit-identical in every run of two or more rows *of its own
  length*, whoever its mates are. So texts are grouped by the exact shape their feed has alone, and
  each group runs in runs of at least two rows: a text alone in its group runs beside a copy of
  itself. Texts of ``alone_from`` sub-words or more run alone instead (their own fixed context): long
  lengths rarely repeat, and a copy would double their cost for nothing.
- ``per-text``: one run per text, at its own length (exports from before the measurement, and any
  graph where the buckets are not bit-identical).

Merging runs of several requests (``serving.batching``) goes through :meth:`Run.joins` so that it
never changes a row's context.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from es_plugin_bridge.core.model_config import EncodeSchedule as Schedule

PER_TEXT = "per-text"
BATCHED = "batched"
LENGTH_BUCKETS = "length-buckets"
SCHEDULES: tuple[Schedule, ...] = (BATCHED, LENGTH_BUCKETS, PER_TEXT)
#: Sub-words from which a ``length-buckets`` text runs alone (recorded in ``verification.alone_from``).
ALONE_FROM = 64


@dataclass(frozen=True)
class Run:
    """One onnxruntime run: ``rows`` are the outputs it gives, in order; ``feed`` the rows it is fed
    (``rows`` followed by copies where a text must not run alone); ``key``: the shape that runs may
    share when merged (``None``: any run of a ``batched`` schedule; a per-text run has a key of its own)."""

    rows: list[int]
    feed: list[int]
    key: Hashable | None

    def joins(self, other: Run, schedule: Schedule) -> bool:
        """Whether ``other`` may be run in one call with this run without changing any row's output."""
        if schedule == BATCHED:
            return True
        return schedule == LENGTH_BUCKETS and self.key is not None and self.key == other.key


def plan(shapes: Sequence[Hashable], lengths: Sequence[int], schedule: Schedule, batch_size: int,
         sort_by_length: bool = True, alone_from: int = ALONE_FROM) -> list[Run]:
    """The runs that encode rows ``0..len(shapes)-1``: ``shapes[i]`` is row i's feed shape alone,
    ``lengths[i]`` its length (what padding costs); at most ``batch_size`` outputs a run."""
    n, size = len(shapes), max(1, batch_size)
    if schedule == PER_TEXT:
        return [Run([i], [i], ("alone", i)) for i in range(n)]
    if schedule == BATCHED:
        if n <= size or not sort_by_length:
            order = list(range(n))
        else:
            order = sorted(range(n), key=lengths.__getitem__)
        return [Run(order[s : s + size], order[s : s + size], None) for s in range(0, n, size)]
    groups: dict[Hashable, list[int]] = {}
    runs: list[Run] = []
    for i in range(n):
        if lengths[i] >= alone_from:
            runs.append(Run([i], [i], ("alone", i)))
        else:
            groups.setdefault(shapes[i], []).append(i)
    for shape, rows in groups.items():
        runs.extend(Run(part, part if len(part) > 1 else part * 2, shape) for part in _cut(rows, size))
    return runs


def _cut(rows: list[int], size: int) -> list[list[int]]:
    """``rows`` in parts of at most ``size`` (at least 2), none of one row unless ``rows`` has one."""
    size = max(2, size)
    parts = [rows[s : s + size] for s in range(0, len(rows), size)]
    if len(parts) > 1 and len(parts[-1]) == 1:
        parts[-1].insert(0, parts[-2].pop())
    return parts


def variant(item: Any, k: int) -> Any:
    """Another input of ``item``'s exact shape: each id sequence (list or array) with its interior
    reversed (``k`` = 0) or rotated by ``k``, first and last ids kept ([CLS] … [SEP])."""
    if isinstance(item, tuple):
        return tuple(variant(part, k) for part in item)
    if len(item) <= 3:
        return item
    inner = item[1:-1]
    moved = inner[::-1] if k == 0 else np.roll(np.asarray(inner), k)
    if isinstance(item, np.ndarray):
        return np.concatenate([item[:1], np.asarray(moved, dtype=item.dtype), item[-1:]])
    return [item[0], *[int(x) for x in moved], item[-1]]


def dependence(run: Callable[[list], np.ndarray], items: Sequence[Any], schedule: Schedule,
               length: Callable[[Any], int], alone_from: int = ALONE_FROM) -> float:
    """Max |Δ| between each item's output in its own run under ``schedule`` (what it gets in a request
    of its own) and in runs the schedule may give it with other inputs: for ``batched`` beside the
    other items (other lengths: padding), for ``length-buckets`` beside 1, 2 and 6 inputs of its shape.
    0.0: the schedule gives every item the same output whatever it is run with."""
    worst = 0.0
    for i, item in enumerate(items):
        if schedule == PER_TEXT or (schedule == LENGTH_BUCKETS and length(item) >= alone_from):
            continue
        own = run([item, item] if schedule == LENGTH_BUCKETS else [item])[0]
        if schedule == BATCHED:
            others = [x for j, x in enumerate(items) if j != i]
            contexts = [[item, *others], [*others[::-1], item]]
            where = [0, len(others)]
        else:
            mates = [variant(item, k) for k in range(7)]
            contexts = [[item, mates[0]], [mates[1], item, mates[2]], [*mates[:3], item, *mates[3:]]]
            where = [0, 1, 3]
        for rows, at in zip(contexts, where, strict=True):
            worst = max(worst, float(np.abs(run(rows)[at] - own).max()))
    return worst


__all__ = ["ALONE_FROM", "BATCHED", "LENGTH_BUCKETS", "PER_TEXT", "SCHEDULES", "Run", "Schedule",
           "dependence", "plan", "variant"]
