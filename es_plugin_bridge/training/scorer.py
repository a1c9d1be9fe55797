"""Score questions with a trained model: per-component scores for reranking, and full search.

Components returned for every model type:
- ``neural``: the encoder similarity (cosine, or Manhattan for the Siamese models);
- ``bow``: cosine of weighted bags of words — the learned weights t for bow-cnn, the vocabulary's
  IDF for the other types (an untrained BOW path, so ``fused`` has the same three inputs for all);
- ``model``: the model's own score (bow-cnn: β₁·bow + β₂·neural; others: ``neural``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import scipy.sparse as sp
import torch

from es_plugin_bridge.core.vocab import PAD_ID, UNK_ID
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.models import QuestionSimilarityModel
from es_plugin_bridge.training.checkpoint import load_checkpoint
from es_plugin_bridge.training.featurize import Featurizer

#: Floor of the Manhattan similarity, as in models.similarity: it stays in (0, 1].
_TINY = float(np.finfo(np.float32).tiny)

COMPONENTS = ("neural", "bow", "model")


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero)."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-8)


class NeuralScorer:
    """A model and its featurizer in eval mode, with a cache of question vectors."""

    def __init__(self, model: QuestionSimilarityModel, featurizer: Featurizer, batch_size: int = 256) -> None:
        self.model = model.eval()
        self.featurizer = featurizer
        self.batch_size = batch_size
        self._vectors: dict[str, np.ndarray] = {}
        self._bow_rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        # The BOW weights t: learned for bow-cnn, the vocabulary's IDF for the other types.
        source = model.bow.weight.detach().numpy() if model.bow is not None else featurizer.vocab.idf
        self.bow_weights = np.asarray(source, dtype=np.float64)

    @classmethod
    def from_dir(cls, directory: Path) -> NeuralScorer:
        model, featurizer, _ = load_checkpoint(directory)
        return cls(model, featurizer)

    # -- encodings ------------------------------------------------------------------------------
    @property
    def similarity(self) -> str:
        return self.model.similarity

    @property
    def needs_bow(self) -> bool:
        """Whether the model's own score uses the BOW path (bow-cnn); others only need it for fusion."""
        return self.model.beta is not None

    @torch.no_grad()
    def vectors(self, questions: Sequence[Question]) -> np.ndarray:
        """Neural vectors [N, D] (cached by question id)."""
        todo = list({q.id: q for q in questions if q.id not in self._vectors}.values())
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start : start + self.batch_size]
            batch = self.featurizer.batch(chunk)
            neural = self.model.encode(**batch)["neural"].numpy()
            for q, vec in zip(chunk, neural, strict=True):
                self._vectors[q.id] = vec
        return np.stack([self._vectors[q.id] for q in questions]) if questions else np.zeros((0, 1))

    def _bow_row(self, question: Question) -> tuple[np.ndarray, np.ndarray]:
        """Vocabulary ids and L2-normalised weights tf·t of one question (cached by id).

        Padding and the unknown-word id are left out: every out-of-vocabulary word shares that id, so
        counting it would make questions full of different unknown words look alike.
        """
        row = self._bow_rows.get(question.id)
        if row is None:
            title, body = self.featurizer.ids(question)
            ids, counts = np.unique(np.asarray(title + body, dtype=np.int64), return_counts=True)
            keep = (ids != PAD_ID) & (ids != UNK_ID)
            ids, counts = ids[keep], counts[keep]
            values = counts * self.bow_weights[ids]
            norm = np.sqrt((values * values).sum())
            row = (ids, values / norm if norm > 0 else values)
            self._bow_rows[question.id] = row
        return row

    def bow_matrix(self, questions: Sequence[Question]) -> sp.csr_matrix:
        """L2-normalised weighted bag of words, one row per question, over vocabulary ids."""
        rows = [self._bow_row(q) for q in questions]
        lengths = [len(ids) for ids, _ in rows]
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        cols = np.concatenate([ids for ids, _ in rows]) if rows else np.zeros(0, dtype=np.int64)
        vals = np.concatenate([v for _, v in rows]) if rows else np.zeros(0)
        return sp.csr_matrix((vals, cols, indptr), shape=(len(questions), len(self.bow_weights)))

    # -- similarities ---------------------------------------------------------------------------
    def neural_similarity(self, q: np.ndarray, docs: np.ndarray, docs_normalised: bool = False) -> np.ndarray:
        """Similarity of query vectors [M, D] to documents [N, D] → [M, N]."""
        if self.model.similarity == "manhattan":
            qt, dt = torch.from_numpy(q), torch.from_numpy(docs)
            return torch.exp(-torch.cdist(qt, dt, p=1)).clamp_min(_TINY).numpy()
        return normalise(q) @ (docs if docs_normalised else normalise(docs)).T

    def combine(self, neural: np.ndarray, bow: np.ndarray) -> np.ndarray:
        if self.model.beta is None:
            return neural
        b1, b2 = (float(x) for x in self.model.beta.detach())
        return b1 * bow + b2 * neural

    def components(self, query: Question, candidates: Sequence[Question]) -> dict[str, np.ndarray]:
        """``neural``, ``bow`` and ``model`` scores of each candidate for ``query``."""
        if not candidates:
            return {name: np.zeros(0) for name in COMPONENTS}
        neural = self.neural_similarity(self.vectors([query]), self.vectors(candidates))[0].astype(np.float64)
        bow = (self.bow_matrix([query]) @ self.bow_matrix(candidates).T).toarray()[0]
        return {"neural": neural, "bow": bow, "model": self.combine(neural, bow)}

    def model_scores(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        """The model's own score only: skips the BOW path for models whose score does not use it."""
        if self.needs_bow:
            return self.components(query, candidates)["model"]
        return self.neural_similarity(self.vectors([query]), self.vectors(candidates))[0].astype(np.float64)

    def pair_components(self, pairs: Sequence[tuple[Question, Question]]) -> dict[str, np.ndarray]:
        """Components for each (q1, q2) pair."""
        if not pairs:
            return {name: np.zeros(0) for name in COMPONENTS}
        a = self.vectors([p[0] for p in pairs])
        b = self.vectors([p[1] for p in pairs])
        if self.model.similarity == "manhattan":
            neural = np.maximum(np.exp(-np.abs(a - b).sum(1)), _TINY)
        else:
            neural = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-8)
        bow = np.asarray(
            self.bow_matrix([p[0] for p in pairs]).multiply(self.bow_matrix([p[1] for p in pairs])).sum(1)
        ).ravel()
        return {"neural": neural.astype(np.float64), "bow": bow, "model": self.combine(neural, bow)}


class SearchScorer(Protocol):
    """What CollectionSearcher needs of a scorer: a NeuralScorer (torch) or
    an exported model directory (``serving.scorer.ExportedScorer``, onnxruntime)."""

    similarity: str  # "cosine" or "manhattan"

    def vectors(self, questions: Sequence[Question]) -> np.ndarray: ...

    def bow_matrix(self, questions: Sequence[Question]) -> sp.csr_matrix: ...

    def neural_similarity(self, queries: np.ndarray, docs: np.ndarray,
                          docs_normalised: bool = False) -> np.ndarray: ...

    def combine(self, neural: np.ndarray, bow: np.ndarray) -> np.ndarray: ...


class CollectionSearcher:
    """Brute-force search of a fixed collection with a scorer (every document scored)."""

    def __init__(self, scorer: SearchScorer, collection: Sequence[Question]) -> None:
        self.scorer = scorer
        self.ids = [q.id for q in collection]
        self.position = {qid: i for i, qid in enumerate(self.ids)}
        self.doc_vectors = self.scorer.vectors(collection)
        self.cosine = self.scorer.similarity != "manhattan"
        if self.cosine:  # normalise once, not once per query
            self.doc_vectors = normalise(self.doc_vectors)
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
