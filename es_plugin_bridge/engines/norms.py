"""Lucene 8's lossy one-byte document-length norm (``SmallFloat.intToByte4`` / ``byte4ToInt``).

Lucene does not keep a document's exact length: at index time it stores one byte per document,
exact below 24 tokens and with 4 significant bits above, and every similarity scores with the
decoded value. Scores only match Lucene's when lengths go through the same round trip.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _long_to_int4(values: NDArray[np.int64]) -> NDArray[np.int64]:
    """Float-like encoding of non-negative ints keeping 4 significant bits (``SmallFloat.longToInt4``)."""
    _, exponent = np.frexp(values.astype(np.float64))  # exponent == bit length for 0 < v < 2**53
    num_bits = exponent.astype(np.int64)
    shift = np.maximum(num_bits - 4, 0)
    normal = ((values >> shift) & 0x07) | ((shift + 1) << 3)
    return np.where(num_bits < 4, values, normal)


def _int4_to_long(values: NDArray[np.int64]) -> NDArray[np.int64]:
    bits = values & 0x07
    shift = (values >> 3) - 1
    return np.where(shift == -1, bits, (bits | 0x08) << np.maximum(shift, 0))


_MAX_INT4 = int(_long_to_int4(np.array([2**31 - 1], dtype=np.int64))[0])
NUM_FREE_VALUES = 255 - _MAX_INT4
"""Lengths below this (24) are stored exactly."""


def int_to_byte4(lengths: ArrayLike) -> NDArray[np.uint8]:
    """Encode document lengths (non-negative ints < 2**31) as Lucene's unsigned norm byte."""
    values = np.asarray(lengths, dtype=np.int64)
    if values.size and (values.min() < 0 or values.max() > 2**31 - 1):
        raise ValueError("document lengths must lie in [0, 2**31 - 1]")
    encoded = np.where(
        values < NUM_FREE_VALUES,
        values,
        NUM_FREE_VALUES + _long_to_int4(np.maximum(values - NUM_FREE_VALUES, 0)),
    )
    return encoded.astype(np.uint8)


def byte4_to_int(norms: ArrayLike) -> NDArray[np.int64]:
    """Decode unsigned norm bytes back to the (approximate) lengths Lucene scores with."""
    values = np.asarray(norms, dtype=np.int64) & 0xFF
    return np.where(
        values < NUM_FREE_VALUES,
        values,
        NUM_FREE_VALUES + _int4_to_long(np.maximum(values - NUM_FREE_VALUES, 0)),
    )


LENGTH_TABLE: NDArray[np.float32] = byte4_to_int(np.arange(256)).astype(np.float32)
"""Decoded length of every norm byte, as the float table Lucene's similarities precompute."""
