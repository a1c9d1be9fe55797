"""Lucene's one-byte length norm: exact for short documents, 4 significant bits beyond."""

from __future__ import annotations

import numpy as np
import pytest

from es_plugin_bridge.engines.norms import LENGTH_TABLE, NUM_FREE_VALUES, byte4_to_int, int_to_byte4

LENGTHS = np.arange(0, 200_000)


def test_short_lengths_are_exact() -> None:
    short = np.arange(NUM_FREE_VALUES)
    assert NUM_FREE_VALUES == 24
    assert byte4_to_int(int_to_byte4(short)).tolist() == short.tolist()


def test_encoding_is_monotone_and_rounds_down_within_an_eighth() -> None:
    encoded = int_to_byte4(LENGTHS).astype(np.int64)
    decoded = byte4_to_int(encoded)
    assert np.all(np.diff(encoded) >= 0)
    assert np.all(decoded <= LENGTHS)
    long = LENGTHS >= NUM_FREE_VALUES
    # 4 significant bits of (length - 24): the loss stays under 1/8 of the length
    assert np.all((LENGTHS[long] - decoded[long]) < LENGTHS[long] / 8)
    assert len(np.unique(encoded)) < len(LENGTHS) // 100  # lossy indeed


def test_every_byte_round_trips_and_the_table_covers_int_range() -> None:
    table = byte4_to_int(np.arange(256))
    assert int_to_byte4(table).tolist() == list(range(256))
    assert np.all(np.diff(table) > 0)
    assert int_to_byte4([2**31 - 1]).tolist() == [255]
    assert LENGTH_TABLE.dtype == np.float32 and LENGTH_TABLE.tolist() == table.astype(np.float32).tolist()


def test_negative_length_is_refused() -> None:
    with pytest.raises(ValueError, match="lengths"):
        int_to_byte4([3, -1])
