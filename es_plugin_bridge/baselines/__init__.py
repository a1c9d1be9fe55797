"""The non-neural baselines of Bogdanova et al. (2015): Jaccard over word shingles, and an RBF SVM.

Both are :class:`PairScorer` s over token lists, so the evaluator runs them like any pair model:
``fit(pairs_tokens, labels)``, then ``score(pairs_tokens)``; :func:`best_threshold` turns scores
into decisions with a threshold tuned on held-out pairs, and ``rank_scores`` reranks candidates.
"""

from __future__ import annotations

from es_plugin_bridge.baselines.base import PairScorer, TokenPair, accuracy, best_threshold
from es_plugin_bridge.baselines.jaccard import JaccardScorer, jaccard, jaccard_features, shingles
from es_plugin_bridge.baselines.svm import PairFeaturizer, SvmScorer, ngrams

__all__ = [
    "JaccardScorer",
    "PairFeaturizer",
    "PairScorer",
    "SvmScorer",
    "TokenPair",
    "accuracy",
    "best_threshold",
    "jaccard",
    "jaccard_features",
    "ngrams",
    "shingles",
]
