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


def _lucene_int_to_byte4(i: int) -> int:
    """``SmallFloat.intToByte4`` as Lucene writes it, one int at a time (no numpy)."""
    if i < NUM_FREE_VALUES:
        return i
    v = i - NUM_FREE_VALUES
    num_bits = v.bit_length()
    if num_bits < 4:
        return NUM_FREE_VALUES + v
    shift = num_bits - 4
    return NUM_FREE_VALUES + (((v >> shift) & 0x07) | ((shift + 1) << 3))


def test_encoding_is_lucenes_scalar_algorithm_across_the_int_range() -> None:
    rng = np.random.default_rng(11)
    values = np.concatenate([np.arange(0, 5000), rng.integers(5000, 2**31 - 1, 20_000),
                             [2**k + d for k in range(5, 31) for d in (-1, 0, 1)], [2**31 - 1]])
    got = int_to_byte4(values)
    assert got.dtype == np.uint8
    assert got.tolist() == [_lucene_int_to_byte4(int(v)) for v in values]


def test_decoding_gives_the_smallest_length_of_each_byte() -> None:
    table = byte4_to_int(np.arange(256))
    for byte in range(1, 256):  # the first length that encodes to `byte` is what it decodes to
        assert _lucene_int_to_byte4(int(table[byte])) == byte
        assert _lucene_int_to_byte4(int(table[byte]) - 1) == byte - 1
    assert byte4_to_int(np.array([-1], dtype=np.int64)).tolist() == [table[255]]  # a signed Java byte


def test_empty_input_and_the_upper_end() -> None:
    assert int_to_byte4([]).tolist() == [] and byte4_to_int([]).tolist() == []
    assert int_to_byte4([0, 2**31 - 1]).tolist() == [0, 255]
    with pytest.raises(ValueError, match=r"^document lengths must lie in \[0, 2\*\*31 - 1\]$"):
        int_to_byte4([2**31])
