"""One scorer contract for evaluation: the ``Scorer`` protocol, its shared implementation and the
onnxruntime backend.

``evaluate --model DIR`` scores with a training checkpoint (PyTorch, ``training.torch_scorer.NeuralScorer``)
or an export-onnx model directory (:class:`ExportedScorer`); ``rankers.scorers.open_scorer`` alone
looks at which one a directory is. Both backends only encode questions — vectors and bags of words,
cached by question id — and inherit every score from :class:`CachedScorer`, which computes it with
``core.scoring``, the maths the sidecar serves. :class:`CollectionSearcher` scores a whole collection
with any scorer. No torch is imported; scipy only for full-collection search.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from es_plugin_bridge.core import scoring
from es_plugin_bridge.core.manifest import MANIFEST
from es_plugin_bridge.core.scoring import COMPONENTS, BagOfWords
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving.model_dir import ModelDirectory

if TYPE_CHECKING:
    import scipy.sparse as sp


def is_exported(directory: Path) -> bool:
    """Whether ``directory`` is an export-onnx model directory (it has a manifest.json)."""
    return (Path(directory) / MANIFEST).is_file()


class Scorer(Protocol):
    """Everything evaluation asks of a model, whichever backend runs it."""

    #: ``cosine`` or ``manhattan``.
    similarity: str

    @property
    def fusion(self) -> dict[str, dict[str, float]]:
        """Fusion β per first stage, as fitted at training time."""
        ...

    def vectors(self, questions: Sequence[Question]) -> np.ndarray: ...

    def bow_matrix(self, questions: Sequence[Question]) -> sp.csr_matrix: ...

    def neural_similarity(self, queries: np.ndarray, docs: np.ndarray,
                          docs_normalised: bool = False) -> np.ndarray: ...

    def combine(self, neural: np.ndarray, bow: np.ndarray) -> np.ndarray: ...

    def components(self, query: Question, candidates: Sequence[Question]) -> dict[str, np.ndarray]: ...

    def model_scores(self, query: Question, candidates: Sequence[Question]) -> np.ndarray: ...

    def pair_components(self, pairs: Sequence[tuple[Question, Question]]) -> dict[str, np.ndarray]: ...


class CachedScorer(ABC):
    """The :class:`Scorer` contract over a backend's encodings, cached by question id.

    A backend gives its similarity, model β, vocabulary size and vector width, and implements
    :meth:`_encode` (vectors of new questions) and :meth:`_bag` (one question's bag of words).
    """

    def __init__(self, similarity: str, beta: tuple[float, float] | None, vocab_size: int,
                 dimension: int) -> None:
        self.similarity = similarity
        self.beta = beta
        self.vocab_size = vocab_size
        self.dimension = dimension
        self._vectors: dict[str, np.ndarray] = {}
        self._bags: dict[str, BagOfWords] = {}

    @property
    @abstractmethod
    def fusion(self) -> dict[str, dict[str, float]]: ...

    @abstractmethod
    def _encode(self, questions: Sequence[Question]) -> np.ndarray:
        """Vectors [N, D] of questions not seen yet (distinct ids)."""

    @abstractmethod
    def _bag(self, question: Question) -> BagOfWords:
        """One question's bag of words (``core.scoring.bag_of_words``)."""

    @property
    def needs_bow(self) -> bool:
        """Whether the model's own score uses the BOW path (bow-cnn); others only need it for fusion."""
        return self.beta is not None

    # -- encodings ------------------------------------------------------------------------------
    def vectors(self, questions: Sequence[Question]) -> np.ndarray:
        """Neural vectors [N, D] (one backend pass over the questions not seen yet)."""
        todo = list({q.id: q for q in questions if q.id not in self._vectors}.values())
        if todo:
            for q, vec in zip(todo, self._encode(todo), strict=True):
                self._vectors[q.id] = vec
        if not questions:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._vectors[q.id] for q in questions])

    def bag(self, question: Question) -> BagOfWords:
        """The bag of words of ``question`` (cached by id)."""
        found = self._bags.get(question.id)
        if found is None:
            found = self._bags[question.id] = self._bag(question)
        return found

    def bow_matrix(self, questions: Sequence[Question]) -> sp.csr_matrix:
        """The bags of words as rows of a sparse matrix over vocabulary ids."""
        import scipy.sparse as sp  # evaluation only (full-collection search): not a serving dependency

        bags = [self.bag(q) for q in questions]
        indptr = np.concatenate([[0], np.cumsum([len(ids) for ids, _ in bags])]).astype(np.int64)
        cols = np.concatenate([ids for ids, _ in bags]) if bags else np.zeros(0, dtype=np.int64)
        vals = np.concatenate([v for _, v in bags]) if bags else np.zeros(0)
        return sp.csr_matrix((vals, cols, indptr), shape=(len(questions), self.vocab_size))

    # -- scores (core.scoring) ----------------------------------------------------------------------
    def neural_similarity(self, queries: np.ndarray, docs: np.ndarray,
                          docs_normalised: bool = False) -> np.ndarray:
        """[M, N] similarities of query vectors [M, D] to documents [N, D]."""
        return np.stack([scoring.neural_similarity(q, docs, self.similarity, docs_normalised)
                         for q in queries])

    def combine(self, neural: np.ndarray, bow: np.ndarray) -> np.ndarray:
        return scoring.model_score(neural, bow, self.beta)

    def components(self, query: Question, candidates: Sequence[Question]) -> dict[str, np.ndarray]:
        """``neural``, ``bow`` and ``model`` scores of each candidate (as ``ModelDirectory.rerank``)."""
        if not candidates:
            return {name: np.zeros(0) for name in COMPONENTS}
        return scoring.scores(self.vectors([query])[0], self.bag(query), self.vectors(candidates),
                              [self.bag(c) for c in candidates], self.similarity, self.beta)

    def model_scores(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        """The model's own score only: skips the BOW path for models whose score does not use it."""
        if self.needs_bow or not candidates:
            return self.components(query, candidates)["model"]
        return scoring.neural_similarity(self.vectors([query])[0], self.vectors(candidates), self.similarity)

    def pair_components(self, pairs: Sequence[tuple[Question, Question]]) -> dict[str, np.ndarray]:
        """Components for each (q1, q2) pair."""
        if not pairs:
            return {name: np.zeros(0) for name in COMPONENTS}
        a, b = self.vectors([p[0] for p in pairs]), self.vectors([p[1] for p in pairs])
        neural = np.array([scoring.neural_similarity(a[i], b[i : i + 1], self.similarity)[0]
                           for i in range(len(pairs))])
        bow = np.array([scoring.bow_similarity(self.bag(q1), [self.bag(q2)])[0] for q1, q2 in pairs])
        return {"neural": neural, "bow": bow, "model": self.combine(neural, bow)}


class ExportedScorer(CachedScorer):
    """An export-onnx model directory behind the :class:`Scorer` contract (onnxruntime)."""

    def __init__(self, model: ModelDirectory) -> None:
        super().__init__(model.similarity, model.config.beta.model, model.config.vocab_size, model.dimension)
        self.model = model

    @classmethod
    def from_dir(cls, directory: Path) -> ExportedScorer:
        return cls(ModelDirectory.load(directory))

    @property
    def fusion(self) -> dict[str, dict[str, float]]:
        """Fusion β per first stage, as stored in the exported config.json."""
        return dict(self.model.fusion)

    def _encode(self, questions: Sequence[Question]) -> np.ndarray:
        return self.model.vectors(questions)

    def _bag(self, question: Question) -> BagOfWords:
        return self.model.bag_of_words(question)


class CollectionSearcher:
    """Brute-force search of a fixed collection with a scorer (every document scored)."""

    def __init__(self, scorer: Scorer, collection: Sequence[Question]) -> None:
        self.scorer = scorer
        self.ids = [q.id for q in collection]
        self.position = {qid: i for i, qid in enumerate(self.ids)}
        self.doc_vectors = self.scorer.vectors(collection)
        self.cosine = self.scorer.similarity != "manhattan"
        if self.cosine:  # normalise once, not once per query
            self.doc_vectors = scoring.normalise(self.doc_vectors)
        self.doc_bow = self.scorer.bow_matrix(collection).T.tocsr()

    def all_scores(self, query: Question) -> dict[str, np.ndarray]:
        query_vectors = self.scorer.vectors([query])
        neural = self.scorer.neural_similarity(query_vectors, self.doc_vectors, self.cosine)[0]
        neural = neural.astype(np.float64)
        bow = (self.scorer.bow_matrix([query]) @ self.doc_bow).toarray()[0]
        return {"neural": neural, "bow": bow, "model": self.scorer.combine(neural, bow)}

    def search(
        self, query: Question, k: int, exclude: set[str] | None = None, component: str = "model"
    ) -> list[tuple[str, float]]:
        scores = self.all_scores(query)[component].copy()
        for qid in exclude or ():
            pos = self.position.get(qid)
            if pos is not None:
                scores[pos] = -np.inf
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.lexsort((top, -scores[top]))]
        return [(self.ids[i], float(scores[i])) for i in top if np.isfinite(scores[i])]


__all__ = ["CachedScorer", "CollectionSearcher", "ExportedScorer", "Scorer", "is_exported"]
