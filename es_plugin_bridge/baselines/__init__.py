"""The non-neural baselines of Bogdanova et al. (2015): Jaccard over word shingles, and an RBF SVM.

Both are :class:`PairScorer` s over token lists, so the evaluator runs them like any pair model:
``fit(pairs_tokens, labels)``, then ``score(pairs_tokens)``; :func:`best_threshold` turns scores
into decisions with a threshold tuned on held-out pairs, and ``rank_scores`` reranks candidates.
"""

from __future__ import annotations

from es_plugin_bridge.baselines.base import PairScorer, TokenPair, accuracy, best_threshold
from es_plugin_bridge.baselines.jaccard import JaccardScorer, jaccard, jaccard_features, shingles
from es_plugin_bridge.baselines.svm import PairFeaturizer, SvmScorer, ngrams

BASELINES: dict[str, type] = {"jaccard": JaccardScorer, "svm": SvmScorer}


def make_baseline(name: str, **options: object) -> PairScorer:
    """A fresh baseline scorer by name (``jaccard`` or ``svm``), options passed to its constructor."""
    from es_plugin_bridge.errors import UserError

    try:
        cls = BASELINES[name]
    except KeyError:
        raise UserError(f"unknown baseline {name!r} (known: {', '.join(BASELINES)})") from None
    return cls(**options)


__all__ = [
    "BASELINES",
    "JaccardScorer",
    "PairFeaturizer",
    "PairScorer",
    "SvmScorer",
    "TokenPair",
    "accuracy",
    "best_threshold",
    "jaccard",
    "jaccard_features",
    "make_baseline",
    "ngrams",
    "shingles",
]
