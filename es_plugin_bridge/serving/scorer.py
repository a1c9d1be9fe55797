"""One scorer contract for evaluation: the ``Scorer`` protocol, its shared implementation and the
onnxruntime backend.

``evaluate --model DIR`` scores with a training checkpoint (PyTorch, ``training.torch_scorer.NeuralScorer``)
or an export-onnx model directory (:class:`ExportedScorer`); ``rankers.scorers.open_scorer`` alone
looks at which one a directory is. Both backends only encode questions — vectors and bags of words,
cached by question id — and inherit every score from :class:`CachedScorer`, which computes it with
``core.scoring``, the maths the sidecar serves. A ``pairwise`` scorer (a cross-encoder) has no vector
per question: its backend scores (query, candidate) pairs (``_pair_logits``, cached by the two ids) and
its ``neural`` is σ of that logit. :class:`CollectionSearcher` scores a whole collection with a
vector scorer. No torch is imported; scipy only for full-collection search.
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
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.model_dir import ModelDirectory

if TYPE_CHECKING:
    import scipy.sparse as sp


def is_exported(directory: Path) -> bool:
    """Whether ``directory`` is an export-onnx model directory (it has a manifest.json)."""
    return (Path(directory) / MANIFEST).is_file()


class Scorer(Protocol):
    """Everything evaluation asks of a model, whichever backend runs it."""

    #: ``cosine``, ``manhattan`` or (a cross-encoder's) ``sigmoid``.
    similarity: str
    #: Whether the model reads query and candidate together: no vector per question (``vectors``
    #: refuses), only pair scores.
    pairwise: bool

    @property
    def fusion(self) -> dict[str, dict[str, float]]:
        """Fusion β per first stage, as fitted at training time."""
        ...

    def vectors(self, questions: Sequence[Question]) -> np.ndarray: ...

    def prepare(self, questions: Sequence[Question]) -> None: ...

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
    :meth:`_encode` (vectors of new questions) and :meth:`_bag` (one question's bag of words); a
    ``pairwise`` backend implements :meth:`_pair_logits` instead of :meth:`_encode`.
    """

    def __init__(self, similarity: str, beta: tuple[float, float] | None, vocab_size: int,
                 dimension: int, pairwise: bool = False) -> None:
        self.similarity = similarity
        self.beta = beta
        self.vocab_size = vocab_size
        self.dimension = dimension
        self.pairwise = pairwise
        self._vectors: dict[str, np.ndarray] = {}
        self._bags: dict[str, BagOfWords] = {}
        self._pairs: dict[tuple[str, str], float] = {}

    @property
    @abstractmethod
    def fusion(self) -> dict[str, dict[str, float]]: ...

    @abstractmethod
    def _encode(self, questions: Sequence[Question]) -> np.ndarray:
        """Vectors [N, D] of questions not seen yet (distinct ids)."""

    @abstractmethod
    def _bag(self, question: Question) -> BagOfWords:
        """One question's bag of words (``core.scoring.bag_of_words``)."""

    def _pair_logits(self, pairs: Sequence[tuple[Question, Question]]) -> np.ndarray:
        """Logits [N] of (query, candidate) pairs not scored yet: a pairwise backend's encoder."""
        raise NotImplementedError(f"{type(self).__name__} scores questions by their vectors, not in pairs")

    @property
    def needs_bow(self) -> bool:
        """Whether the model's own score uses the BOW path (bow-cnn); others only need it for fusion."""
        return self.beta is not None

    # -- encodings ------------------------------------------------------------------------------
    def vectors(self, questions: Sequence[Question]) -> np.ndarray:
        """Neural vectors [N, D] (one backend pass over the questions not seen yet); UserError for a
        pairwise model, which has none."""
        if self.pairwise:
            raise UserError("a cross-encoder reads each (query, candidate) pair together and has no vector "
                            "per question: it reranks a first stage's window (rankers model, fused; "
                            "Elasticsearch's native mode), it cannot search a whole collection (dense, "
                            "hybrid) or embed")
        todo = list({q.id: q for q in questions if q.id not in self._vectors}.values())
        if todo:
            for q, vec in zip(todo, self._encode(todo), strict=True):
                self._vectors[q.id] = vec
        if not questions:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._vectors[q.id] for q in questions])

    def prepare(self, questions: Sequence[Question]) -> None:
        """Encode ``questions`` ahead, in one batched pass: their vectors (a pairwise model has none;
        its pairs are scored when asked)."""
        if not self.pairwise:
            self.vectors(questions)

    def pair_neural(self, pairs: Sequence[tuple[Question, Question]]) -> np.ndarray:
        """A pairwise model's ``neural`` [N] float64 of (query, candidate) pairs: σ of their logits
        (``core.scoring.pair_similarity``), each distinct pair run once (cached by the two ids)."""
        keys = [(q.id, c.id) for q, c in pairs]
        todo = list({key: pair for key, pair in zip(keys, pairs, strict=True)
                     if key not in self._pairs}.items())
        if todo:
            for (key, _), logit in zip(todo, self._pair_logits([pair for _, pair in todo]), strict=True):
                self._pairs[key] = float(logit)
        return scoring.pair_similarity(np.array([self._pairs[key] for key in keys], dtype=np.float64))

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
        bags = [self.bag(c) for c in candidates]
        if self.pairwise:
            neural = self.pair_neural([(query, c) for c in candidates])
            return scoring.component_scores(neural, self.bag(query), bags, self.beta)
        return scoring.scores(self.vectors([query])[0], self.bag(query), self.vectors(candidates),
                              bags, self.similarity, self.beta)

    def model_scores(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        """The model's own score only: skips the BOW path for models whose score does not use it."""
        if self.needs_bow or not candidates:
            return self.components(query, candidates)["model"]
        if self.pairwise:
            return self.pair_neural([(query, c) for c in candidates])
        return scoring.neural_similarity(self.vectors([query])[0], self.vectors(candidates), self.similarity)

    def pair_components(self, pairs: Sequence[tuple[Question, Question]]) -> dict[str, np.ndarray]:
        """Components for each (q1, q2) pair."""
        if not pairs:
            return {name: np.zeros(0) for name in COMPONENTS}
        if self.pairwise:
            neural = self.pair_neural(pairs)
        else:
            a, b = self.vectors([p[0] for p in pairs]), self.vectors([p[1] for p in pairs])
            neural = np.array([scoring.neural_similarity(a[i], b[i : i + 1], self.similarity)[0]
                               for i in range(len(pairs))])
        bow = np.array([scoring.bow_similarity(self.bag(q1), [self.bag(q2)])[0] for q1, q2 in pairs])
        return {"neural": neural, "bow": bow, "model": self.combine(neural, bow)}


class ExportedScorer(CachedScorer):
    """An export-onnx model directory behind the :class:`Scorer` contract (onnxruntime)."""

    def __init__(self, model: ModelDirectory) -> None:
        super().__init__(model.similarity, model.config.beta.model, model.config.vocab_size, model.dimension,
                         model.pairwise)
        self.model = model
        self._sides: dict[str, np.ndarray] = {}

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

    def _pair_logits(self, pairs: Sequence[tuple[Question, Question]]) -> np.ndarray:
        """The directory's pair graph on (query side, candidate side) pairs, sides cached by question id."""
        todo = list({q.id: q for pair in pairs for q in pair if q.id not in self._sides}.values())
        if todo:
            for q, side in zip(todo, self.model.states_from_ids(self.model.inputs.encode(todo)), strict=True):
                self._sides[q.id] = side
        return self.model.pair_logits([(self._sides[q.id], self._sides[c.id]) for q, c in pairs])


class CollectionSearcher:
    """Brute-force search of a fixed collection with a scorer (every document scored)."""

    def __init__(self, scorer: Scorer, collection: Sequence[Question]) -> None:
        if scorer.pairwise:
            raise UserError("a cross-encoder cannot search a whole collection (it would run every document "
                            "with every query): it reranks a first stage's window; use the fused ranker or "
                            "rerank a first stage's candidates")
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
