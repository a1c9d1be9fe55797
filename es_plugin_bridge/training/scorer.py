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

import numpy as np
import scipy.sparse as sp
import torch

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.models import QuestionSimilarityModel
from es_plugin_bridge.training.checkpoint import load_checkpoint
from es_plugin_bridge.training.featurize import Featurizer
from es_plugin_bridge.training.vocab import PAD_ID

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

    @classmethod
    def from_dir(cls, directory: Path) -> NeuralScorer:
        model, featurizer, _ = load_checkpoint(directory)
        return cls(model, featurizer)

    # -- encodings ------------------------------------------------------------------------------
    @property
    def bow_weights(self) -> np.ndarray:
        if self.model.bow is not None:
            return self.model.bow.weight.detach().numpy().astype(np.float64)
        return np.asarray(self.featurizer.vocab.idf, dtype=np.float64)

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

    def bow_matrix(self, questions: Sequence[Question]) -> sp.csr_matrix:
        """L2-normalised weighted bag of words, one row per question, over vocabulary ids."""
        weights = self.bow_weights
        rows, cols, vals = [], [], []
        for i, q in enumerate(questions):
            title, body = self.featurizer.ids(q)
            ids, counts = np.unique(np.asarray(title + body, dtype=np.int64), return_counts=True)
            keep = ids != PAD_ID
            ids, counts = ids[keep], counts[keep]
            values = counts * weights[ids]
            norm = np.sqrt((values * values).sum())
            if norm > 0:
                values = values / norm
            rows.append(np.full(len(ids), i))
            cols.append(ids)
            vals.append(values)
        shape = (len(questions), len(weights))
        if not rows:
            return sp.csr_matrix(shape)
        return sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=shape
        )

    # -- similarities ---------------------------------------------------------------------------
    def _neural_sim(self, q: np.ndarray, docs: np.ndarray, docs_normalised: bool = False) -> np.ndarray:
        """Similarity of query vectors [M, D] to documents [N, D] → [M, N]."""
        if self.model.similarity == "manhattan":
            qt, dt = torch.from_numpy(q), torch.from_numpy(docs)
            return torch.exp(-torch.cdist(qt, dt, p=1)).numpy()
        return normalise(q) @ (docs if docs_normalised else normalise(docs)).T

    def _combine(self, neural: np.ndarray, bow: np.ndarray) -> np.ndarray:
        if self.model.beta is None:
            return neural
        b1, b2 = (float(x) for x in self.model.beta.detach())
        return b1 * bow + b2 * neural

    def components(self, query: Question, candidates: Sequence[Question]) -> dict[str, np.ndarray]:
        """``neural``, ``bow`` and ``model`` scores of each candidate for ``query``."""
        if not candidates:
            return {name: np.zeros(0) for name in COMPONENTS}
        neural = self._neural_sim(self.vectors([query]), self.vectors(candidates))[0]
        bow = (self.bow_matrix([query]) @ self.bow_matrix(candidates).T).toarray()[0]
        return {"neural": neural.astype(np.float64), "bow": bow, "model": self._combine(neural, bow)}

    def pair_components(self, pairs: Sequence[tuple[Question, Question]]) -> dict[str, np.ndarray]:
        """Components for each (q1, q2) pair."""
        if not pairs:
            return {name: np.zeros(0) for name in COMPONENTS}
        a = self.vectors([p[0] for p in pairs])
        b = self.vectors([p[1] for p in pairs])
        if self.model.similarity == "manhattan":
            neural = np.exp(-np.abs(a - b).sum(1))
        else:
            neural = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-8)
        bow = np.asarray(
            self.bow_matrix([p[0] for p in pairs]).multiply(self.bow_matrix([p[1] for p in pairs])).sum(1)
        ).ravel()
        return {"neural": neural.astype(np.float64), "bow": bow, "model": self._combine(neural, bow)}


class CollectionSearcher:
    """Brute-force search of a fixed collection with a NeuralScorer (every document scored)."""

    def __init__(self, scorer: NeuralScorer, collection: Sequence[Question]) -> None:
        self.scorer = scorer
        self.ids = [q.id for q in collection]
        self.position = {qid: i for i, qid in enumerate(self.ids)}
        self.doc_vectors = scorer.vectors(collection)
        self.cosine = scorer.model.similarity != "manhattan"
        if self.cosine:  # normalise once, not once per query
            self.doc_vectors = normalise(self.doc_vectors)
        self.doc_bow = scorer.bow_matrix(collection).T.tocsr()

    def all_scores(self, query: Question) -> dict[str, np.ndarray]:
        neural = self.scorer._neural_sim(self.scorer.vectors([query]), self.doc_vectors, self.cosine)[0]
        neural = neural.astype(np.float64)
        bow = (self.scorer.bow_matrix([query]) @ self.doc_bow).toarray()[0]
        return {"neural": neural, "bow": bow, "model": self.scorer._combine(neural, bow)}

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
