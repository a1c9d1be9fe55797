"""SVM baseline of Bogdanova et al. (2015): RBF-kernel SVM over n-gram features of a pair plus Jaccard values.

Features, as in the paper's Section 5.2: every word n-gram of length 1..4 seen in at least
``min_df`` training questions (each question of each training pair counted; the paper's frequency
threshold, 5 after cross-validation) gives three features for a pair — (1) present in the first
question, (2) present in the second, (3) its count in both questions together divided by the number
of n-grams of both (our reading of "the overall normalized count"). The paper's best baseline adds
the Jaccard coefficients of shingle sizes 1..4 (``jaccard=True``); the score is the SVM's signed
distance to the boundary (decision_function).

C and γ: the paper grid-searched them (optimum C = 32, γ ≈ 3.05e-05 for its LibSVM feature scaling).
That γ does not transfer to these features (0.72 accuracy on AskUbuntu, 4K training pairs): its
kernel is nearly constant. We repeated a small grid, C ∈ {2, 8} × γ ∈ {scale, 0.003, 0.01, 0.03},
training on 4,000 ``train_titles.tsv`` pairs and scoring 4,000 other ones: accuracy 0.78-0.85;
C = 8 with scikit-learn's γ = "scale" (1 / (features × variance), ≈ 1 / mean squared row norm) was
among the best (0.842) and adapts to the feature count, so it is the default.

Training cost: libsvm's SVC grows faster than linearly with the number of pairs; ``max_train``
subsamples the training pairs (seeded) when a full fit would be too slow. Measured with
``python -m es_plugin_bridge.baselines.measure`` (4,000 test and 4,000 dev pairs of
``train_titles.tsv`` held out, one busy core): 8,000 training pairs fit in 57 s (test accuracy
85.5%), all 16,000 remaining pairs in 541 s (88.0%); unigram Jaccard gets 78.3%.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from safetensors.numpy import load_file, save_file
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC

from es_plugin_bridge.baselines.base import TokenPair, check_labels
from es_plugin_bridge.baselines.jaccard import SIZES, jaccard_features
from es_plugin_bridge.errors import DataFormatError, UserError

SVM_FORMAT = "es_plugin_bridge.svm-baseline"

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

    def columns(self) -> list[str]:
        """The kept n-grams in column order (tokens joined by U+001F)."""
        if self._vectorizer is None:
            return []
        vocab = self._vectorizer.vocabulary_
        return sorted(vocab, key=vocab.__getitem__)

    def set_columns(self, columns: Sequence[str]) -> None:
        """Use a saved column list instead of fitting."""
        self._vectorizer = CountVectorizer(
            analyzer=self._analyzer, vocabulary={ng: i for i, ng in enumerate(columns)}, lowercase=False
        )
        self._vectorizer.fit([])  # validates the fixed vocabulary; learns nothing

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


@dataclass(frozen=True)
class RbfDecision:
    """A fitted binary RBF SVM as plain arrays: ``f(x) = Σ_i coef_i · exp(−γ‖x − sv_i‖²) + intercept``.

    Scoring from these arrays (rather than a pickled scikit-learn object) lets a saved SVM load
    without executing code; it equals ``SVC.decision_function`` (positive = duplicate).
    """

    support_vectors: sp.csr_matrix
    coef: np.ndarray
    intercept: float
    gamma: float

    @classmethod
    def from_svc(cls, svm: SVC) -> RbfDecision:
        coef = svm.dual_coef_  # sparse when the SVM was trained on sparse features
        return cls(
            sp.csr_matrix(svm.support_vectors_, dtype=np.float64),
            np.asarray(coef.toarray() if sp.issparse(coef) else coef, dtype=np.float64)[0],
            float(svm.intercept_[0]),
            float(svm._gamma),
        )

    def __call__(self, x: sp.csr_matrix, chunk: int = 1024) -> np.ndarray:
        out = np.empty(x.shape[0], dtype=np.float64)
        x = sp.csr_matrix(x, dtype=np.float64)
        for lo in range(0, x.shape[0], chunk):
            kernel = rbf_kernel(x[lo : lo + chunk], self.support_vectors, gamma=self.gamma)
            out[lo : lo + chunk] = kernel @ self.coef + self.intercept
        return out


class SvmScorer:
    """RBF SVM pair scorer over :class:`PairFeaturizer` features; ``score`` is the decision value.

    ``save(directory)`` writes ``svm.json`` (options, n-gram columns) and ``svm.safetensors`` (support
    vectors, coefficients); ``SvmScorer.load(directory)`` reads them back without executing code.
    """

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
        self.decision: RbfDecision | None = None
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
        self.decision = RbfDecision.from_svc(self.svm)
        self.n_train = len(pairs)

    def score(self, pairs_tokens: Sequence[TokenPair]) -> np.ndarray:
        if self.decision is None:
            raise RuntimeError("SvmScorer.score before fit")
        if len(pairs_tokens) == 0:
            return np.zeros(0, dtype=np.float64)
        return self.decision(self.featurizer.transform(pairs_tokens))

    def rank_scores(self, query: Sequence[str], candidates: Sequence[Sequence[str]]) -> np.ndarray:
        """Scores of candidates for reranking against one query."""
        return self.score([(query, c) for c in candidates])

    # -- storage (no pickle) --------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write ``svm.json`` and ``svm.safetensors`` into ``directory`` (created if needed)."""
        if self.decision is None:
            raise RuntimeError("SvmScorer.save before fit")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        sv = self.decision.support_vectors
        save_file(
            {
                "sv_data": np.ascontiguousarray(sv.data, dtype=np.float64),
                "sv_indices": np.ascontiguousarray(sv.indices, dtype=np.int64),
                "sv_indptr": np.ascontiguousarray(sv.indptr, dtype=np.int64),
                "coef": np.ascontiguousarray(self.decision.coef),
            },
            str(out / "svm.safetensors"),
        )
        meta = {
            "format": SVM_FORMAT,
            "version": 1,
            "C": self.C,
            "gamma": self.decision.gamma,
            "intercept": self.decision.intercept,
            "n_features": int(sv.shape[1]),
            "max_n": self.featurizer.max_n,
            "min_df": self.featurizer.min_df,
            "jaccard": self.featurizer.jaccard,
            "n_train": self.n_train,
            "ngrams": self.featurizer.columns(),
        }
        (out / "svm.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> SvmScorer:
        """Read what :meth:`save` wrote; a missing or inconsistent file raises a UserError naming it."""
        src = Path(directory)
        meta_path, arrays_path = src / "svm.json", src / "svm.safetensors"
        for path in (meta_path, arrays_path):
            if not path.is_file():
                raise UserError(f"SVM baseline file not found: {path}")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataFormatError(str(meta_path), "json", str(exc)) from None
        if not isinstance(meta, dict) or meta.get("format") != SVM_FORMAT:
            raise DataFormatError(str(meta_path), "format", f"not an SVM baseline (expected {SVM_FORMAT!r})")
        try:
            arrays = load_file(str(arrays_path))
            scorer = cls(
                C=meta["C"],
                gamma=meta["gamma"],
                max_n=meta["max_n"],
                min_df=meta["min_df"],
                jaccard=meta["jaccard"],
            )
            scorer.featurizer.set_columns(meta["ngrams"])
            n_features = 3 * len(meta["ngrams"]) + (len(SIZES) if meta["jaccard"] else 0)
            if n_features != meta["n_features"]:
                raise ValueError(f"{len(meta['ngrams'])} n-grams do not give {meta['n_features']} features")
            sv = sp.csr_matrix(
                (arrays["sv_data"], arrays["sv_indices"], arrays["sv_indptr"]),
                shape=(len(arrays["sv_indptr"]) - 1, n_features),
            )
            if sv.shape[0] != len(arrays["coef"]):
                raise ValueError("support vectors and coefficients differ in number")
        except (KeyError, ValueError, TypeError) as exc:
            raise DataFormatError(str(src), "svm", f"inconsistent SVM baseline: {exc}") from None
        scorer.decision = RbfDecision(sv, arrays["coef"], float(meta["intercept"]), float(meta["gamma"]))
        scorer.n_train = int(meta.get("n_train", 0))
        return scorer
