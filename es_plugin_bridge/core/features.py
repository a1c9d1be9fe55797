"""The weighted bag of words as search-engine features: keys and values an index stores as is.

Both the sidecar (``/v1/encode``'s ``bow_tokens``/``bow_weights``, read by an Elasticsearch
``sparse_embedding`` endpoint at ingest) and the client-side indexer (``elastic.mappings``) write the
same features, so they live here, below both.

- Keys: Elasticsearch reads a dot in a ``rank_features``/``sparse_vector`` key as an object path, so
  ``.`` and the escape character are percent-encoded (``12.04`` → ``12%2E04``).
- Values: Lucene's ``FeatureField`` takes positive normal floats only; a term's value is |tf·w|/‖bow‖
  (the sign of w cancels in the BOW cosine: Σ tf_q·tf_d·w² / (‖q‖·‖d‖)), and values below the smallest
  normal float are left out (they would add nothing measurable).
"""

from __future__ import annotations

from collections.abc import Mapping

MIN_FEATURE = 1.17549435e-38  # Lucene's FeatureField takes positive normal floats only


def feature_key(token: str) -> str:
    """A ``rank_features`` key for a token (``12.04`` → ``12%2E04``; ``%`` → ``%25``)."""
    return token.replace("%", "%25").replace(".", "%2E")


def bow_features(terms: Mapping[str, float]) -> dict[str, float]:
    """Index-side BOW features from L2-normalised terms ``tf·w/‖bow‖``: key → |value| (≥ MIN_FEATURE)."""
    return {feature_key(t): abs(float(v)) for t, v in terms.items() if abs(float(v)) >= MIN_FEATURE}
