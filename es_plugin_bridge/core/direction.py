"""Whether a vector has a direction: one rule for storing, querying and skipping zero vectors.

Why one place: Elasticsearch refuses to index a zero vector under ``cosine`` ("does not support vectors
with zero magnitude"), ``cosineSimilarity`` of a zero query vector is NaN (which ``script_score``
refuses) and ``knn`` refuses it; a text with no tokens can embed to it. Indexing, the hybrid modes and
the query bodies must agree on which vectors those are.
"""

from __future__ import annotations

from collections.abc import Sequence


def has_direction(vector: Sequence[float]) -> bool:
    """Whether ``vector`` can be stored or searched under cosine (a zero vector has no direction)."""
    return any(float(x) != 0.0 for x in vector)
