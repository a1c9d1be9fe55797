"""The encoder's schedule (``serving.encode_schedule.plan``): which rows share an onnxruntime run.

The rules restated: ``batched`` keeps request order up to ``batch_size`` rows and sorts by length
beyond it; ``length-buckets`` puts only rows of one feed shape in a run, never a row alone (a lone row
of its shape runs beside a copy of itself), and rows of ``alone_from`` or more run alone; ``per-text``
runs every row alone. Every row is an output of exactly one run.
"""

from __future__ import annotations

import random

from es_plugin_bridge.serving.encode_schedule import BATCHED, LENGTH_BUCKETS, PER_TEXT, plan


def _outputs(runs) -> list[int]:
    return sorted(i for run in runs for i in run.rows)


def test_length_buckets_share_a_run_only_with_their_own_shape_and_never_alone():
    rng = random.Random(4)
    lengths = [rng.choice([5, 6, 7, 9, 12, 70, 80]) for _ in range(101)]
    shapes = [((n,), (n,)) for n in lengths]
    for size in (2, 3, 16, 64):
        runs = plan(shapes, lengths, LENGTH_BUCKETS, size, alone_from=64)
        assert _outputs(runs) == list(range(101))
        for run in runs:
            assert run.feed[: len(run.rows)] == run.rows
            assert len({shapes[i] for i in run.feed}) == 1  # one shape: nothing is padded
            if lengths[run.rows[0]] >= 64:
                assert run.feed == run.rows and len(run.rows) == 1
            else:
                assert len(run.feed) >= 2 and len(run.rows) <= max(2, size)
                assert len(run.feed) == len(run.rows) or run.feed == run.rows * 2


def test_a_lone_short_row_runs_beside_its_copy():
    runs = plan([(7,)], [7], LENGTH_BUCKETS, 16)
    assert [(run.rows, run.feed) for run in runs] == [([0], [0, 0])]
    three = plan([(7,)] * 3, [7] * 3, LENGTH_BUCKETS, 2)
    assert [len(run.feed) for run in three] == [2, 2] and _outputs(three) == [0, 1, 2]


def test_runs_join_only_where_the_schedule_allows():
    a, b = plan([(5,), (6,)], [5, 6], LENGTH_BUCKETS, 16)
    assert not a.joins(b, LENGTH_BUCKETS)
    c, d = plan([(5,), (5,)] * 2, [5] * 4, LENGTH_BUCKETS, 2)
    assert c.joins(d, LENGTH_BUCKETS)
    x, y = plan([(5,), (6,)], [5, 6], PER_TEXT, 16)
    assert not x.joins(y, PER_TEXT) and x.feed == [0] and y.feed == [1]
    (whole,) = plan([(5,), (9,)], [5, 9], BATCHED, 16)
    assert whole.rows == [0, 1] and whole.joins(whole, BATCHED)


def test_batched_sorts_by_length_only_beyond_one_run():
    lengths = [9, 3, 7, 1, 5]
    assert [run.rows for run in plan([None] * 5, lengths, BATCHED, 8)] == [[0, 1, 2, 3, 4]]
    assert [run.rows for run in plan([None] * 5, lengths, BATCHED, 2)] == [[3, 1], [4, 2], [0]]
    in_order = plan([None] * 5, lengths, BATCHED, 2, sort_by_length=False)
    assert [run.rows for run in in_order] == [[0, 1], [2, 3], [4]]
