"""SVM baseline of Bogdanova et al. (2015): RBF-kernel SVM over n-gram features of a pair plus Jaccard values.

Features, as in the paper's Section 5.2: every word n-gram of length 1..4 seen in at least
``min_df`` training questions (the paper's frequency threshold, 5 after cross-validation) gives three
features for a pair — (1) present in the first question, (2) present in the second, (3) its count in
both questions together divided by the number of n-grams of both (our reading of "the overall
normalized count"). The paper's best baseline adds the Jaccard coefficients of shingle sizes 1..4
(``jaccard=True``); the score is the SVM's signed distance to the boundary (decision_function).

C and γ: the paper grid-searched them (optimum C = 32, γ ≈ 3.05e-05 for its LibSVM feature scaling).
That γ does not transfer to these features (0.72 accuracy on AskUbuntu, 4K training pairs): its
kernel is nearly constant. We repeated a small grid, C ∈ {2, 8} × γ ∈ {scale, 0.003, 0.01, 0.03},
training on 4,000 ``train_titles.tsv`` pairs and scoring 4,000 other ones: accuracy 0.78-0.85;
C = 8 with scikit-learn's γ = "scale" (1 / (features × variance), ≈ 1 / mean squared row norm) was
among the best (0.842) and adapts to the feature count, so it is the default.

Training cost: libsvm's SVC grows faster than linearly with the number of pairs; ``max_train``
subsamples the training pairs (seeded) when a full fit would be too slow. The measured time for the
24,000 AskUbuntu title pairs is in the README's results table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.svm import SVC

from es_plugin_bridge.baselines.base import TokenPair, check_labels
from es_plugin_bridge.baselines.jaccard import SIZES, jaccard_features

_JOIN = "\x1f"  # never produced by the tokeniser, so joined n-grams cannot collide


def ngrams(tokens: Sequence[str], max_n: int = 4) -> list[str]:
    """All word n-grams of length 1..max_n, each as one string (tokens joined by U+001F)."""
    toks = list(tokens)
    return [_JOIN.join(toks[i : i + n]) for n in range(1, max_n + 1) for i in range(len(toks) - n + 1)]


class PairFeaturizer:
    """Turns token pairs into the sparse feature matrix [pairs, 3·F (+4)] described in the module doc."""

    def __init__(self, max_n: int = 4, min_df: int = 5, jaccard: bool = True) -> None:
        self.max_n = max_n
        self.min_df = min_df
        self.jaccard = jaccard
        self._vectorizer: CountVectorizer | None = None

    def _analyzer(self, tokens: Sequence[str]) -> list[str]:
        return ngrams(tokens, self.max_n)

    def fit(self, pairs_tokens: Sequence[TokenPair]) -> PairFeaturizer:
        docs = [q for pair in pairs_tokens for q in pair]
        self._vectorizer = CountVectorizer(analyzer=self._analyzer, min_df=self.min_df, lowercase=False)
        try:
            self._vectorizer.fit(docs)
        except ValueError:  # no n-gram reaches min_df: the Jaccard features still work
            self._vectorizer = CountVectorizer(analyzer=self._analyzer, min_df=1, lowercase=False)
            self._vectorizer.fit([["\x1e"]])
        return self

    @property
    def n_ngrams(self) -> int:
        return 0 if self._vectorizer is None else len(self._vectorizer.vocabulary_)

    def transform(self, pairs_tokens: Sequence[TokenPair]) -> sp.csr_matrix:
        if self._vectorizer is None:
            raise RuntimeError("PairFeaturizer.transform before fit")
        first = [a for a, _ in pairs_tokens]
        second = [b for _, b in pairs_tokens]
        c1 = self._vectorizer.transform(first).astype(np.float32)
        c2 = self._vectorizer.transform(second).astype(np.float32)
        totals = np.array(
            [len(ngrams(a, self.max_n)) + len(ngrams(b, self.max_n)) for a, b in pairs_tokens],
            dtype=np.float32,
        )
        norm = sp.diags(1.0 / np.maximum(totals, 1.0)) @ (c1 + c2)
        blocks = [(c1 > 0).astype(np.float32), (c2 > 0).astype(np.float32), norm]
        if self.jaccard:
            jac = np.array([jaccard_features(a, b, SIZES) for a, b in pairs_tokens], dtype=np.float32)
            blocks.append(sp.csr_matrix(jac.reshape(len(pairs_tokens), len(SIZES))))
        return sp.hstack(blocks, format="csr", dtype=np.float32)


class SvmScorer:
    """RBF SVM pair scorer over :class:`PairFeaturizer` features; ``score`` is the decision value."""

    def __init__(
        self,
        C: float = 8.0,  # noqa: N803 - the paper's and scikit-learn's name
        gamma: float | str = "scale",
        max_n: int = 4,
        min_df: int = 5,
        jaccard: bool = True,
        max_train: int | None = None,
        seed: int = 1,
        cache_mb: int = 500,
    ) -> None:
        self.featurizer = PairFeaturizer(max_n=max_n, min_df=min_df, jaccard=jaccard)
        self.C = C
        self.gamma = gamma
        self.max_train = max_train
        self.seed = seed
        self.cache_mb = cache_mb
        self.svm: SVC | None = None
        self.n_train = 0

    def fit(self, pairs_tokens: Sequence[TokenPair], labels: Sequence[int]) -> None:
        y = check_labels(pairs_tokens, labels)
        if len(set(y.tolist())) < 2:
            raise ValueError("the SVM needs both duplicate and non-duplicate training pairs")
        pairs = list(pairs_tokens)
        if self.max_train is not None and len(pairs) > self.max_train:
            keep = np.sort(np.random.default_rng(self.seed).choice(len(pairs), self.max_train, replace=False))
            pairs = [pairs[i] for i in keep]
            y = y[keep]
        self.featurizer.fit(pairs)
        x = self.featurizer.transform(pairs)
        self.svm = SVC(
            kernel="rbf", C=self.C, gamma=self.gamma, cache_size=self.cache_mb, random_state=self.seed
        )
        self.svm.fit(x, y)
        self.n_train = len(pairs)

    def score(self, pairs_tokens: Sequence[TokenPair]) -> np.ndarray:
        if self.svm is None:
            raise RuntimeError("SvmScorer.score before fit")
        if len(pairs_tokens) == 0:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(
            self.svm.decision_function(self.featurizer.transform(pairs_tokens)), dtype=np.float64
        )

    def rank_scores(self, query: Sequence[str], candidates: Sequence[Sequence[str]]) -> np.ndarray:
        """Scores of candidates for reranking against one query."""
        return self.score([(query, c) for c in candidates])
