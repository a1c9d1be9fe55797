"""An exported model directory behind the scorer interface the ``model``/``fused`` rankers use.

``evaluate --model DIR`` accepts the export-onnx output as well as a training checkpoint. This
adapter gives a ``ModelDirectory`` the calls of ``training.scorer.NeuralScorer`` that the rankers
make (``components``, ``pair_components``, ``model_scores``) and the ``SearchScorer`` protocol of
``training.scorer.CollectionSearcher`` (full-collection search). Every score goes through the
directory's own (sidecar) functions; only the per-question vectors and bags of words are cached.
No torch is imported; scipy only for full-collection search.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from es_plugin_bridge.core.manifest import MANIFEST
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving.model_dir import COMPONENTS, BagOfWords, ModelDirectory

if TYPE_CHECKING:
    import scipy.sparse as sp


def is_exported(directory: Path) -> bool:
    """Whether ``directory`` is an export-onnx model directory (it has a manifest.json)."""
    return (Path(directory) / MANIFEST).is_file()


class ExportedScorer:
    """Scores of an exported model, with vectors and bags of words cached by question id."""

    def __init__(self, model: ModelDirectory) -> None:
        self.model = model
        self.similarity: str = model.similarity
        self._vectors: dict[str, np.ndarray] = {}
        self._bags: dict[str, BagOfWords] = {}

    @classmethod
    def from_dir(cls, directory: Path) -> ExportedScorer:
        return cls(ModelDirectory.load(directory))

    @property
    def fusion(self) -> dict[str, dict[str, float]]:
        """Fusion β per first stage, as stored in the exported config.json."""
        return self.model.fusion

    # -- SearchScorer ---------------------------------------------------------------------------
    def vectors(self, questions: Sequence[Question]) -> np.ndarray:
        """Neural vectors [N, D] (one onnxruntime pass over the questions not seen yet)."""
        todo = list({q.id: q for q in questions if q.id not in self._vectors}.values())
        for q, vec in zip(todo, self.model.vectors(todo), strict=True):
            self._vectors[q.id] = vec
        if not questions:
            return np.zeros((0, self.model.dimension), dtype=np.float32)
        return np.stack([self._vectors[q.id] for q in questions])

    def _bag(self, question: Question) -> BagOfWords:
        bag = self._bags.get(question.id)
        if bag is None:
            bag = self._bags[question.id] = self.model.bag_of_words(question)
        return bag

    def bow_matrix(self, questions: Sequence[Question]) -> sp.csr_matrix:
        """The bags of words as rows of a sparse matrix over vocabulary ids."""
        import scipy.sparse as sp  # evaluation only (full-collection search): not a serving dependency

        bags = [self._bag(q) for q in questions]
        indptr = np.concatenate([[0], np.cumsum([len(ids) for ids, _ in bags])]).astype(np.int64)
        cols = np.concatenate([ids for ids, _ in bags]) if bags else np.zeros(0, dtype=np.int64)
        vals = np.concatenate([v for _, v in bags]) if bags else np.zeros(0)
        return sp.csr_matrix((vals, cols, indptr), shape=(len(questions), self.model.config.vocab_size))

    def neural_similarity(self, queries: np.ndarray, docs: np.ndarray,
                          docs_normalised: bool = False) -> np.ndarray:
        """[M, N] similarities (``docs_normalised`` needs no care: normalising twice changes nothing)."""
        return np.stack([self.model.neural_similarity(q, docs) for q in queries])

    def combine(self, neural: np.ndarray, bow: np.ndarray) -> np.ndarray:
        return self.model.model_score(neural, bow)

    # -- the rankers' calls -----------------------------------------------------------------------
    def components(self, query: Question, candidates: Sequence[Question]) -> dict[str, np.ndarray]:
        """``neural``, ``bow`` and ``model`` scores of each candidate (as ``ModelDirectory.rerank``)."""
        if not candidates:
            return {name: np.zeros(0) for name in COMPONENTS}
        neural = self.model.neural_similarity(self.vectors([query])[0], self.vectors(candidates))
        bow = self.model.bow_similarity(self._bag(query), [self._bag(c) for c in candidates])
        return {"neural": neural, "bow": bow, "model": self.combine(neural, bow)}

    def model_scores(self, query: Question, candidates: Sequence[Question]) -> np.ndarray:
        return self.components(query, candidates)["model"]

    def pair_components(self, pairs: Sequence[tuple[Question, Question]]) -> dict[str, np.ndarray]:
        """Components for each (q1, q2) pair."""
        a, b = self.vectors([p[0] for p in pairs]), self.vectors([p[1] for p in pairs])
        neural = np.array([self.model.neural_similarity(a[i], b[i : i + 1])[0] for i in range(len(pairs))])
        bow = np.array([self.model.bow_similarity(self._bag(q1), [self._bag(q2)])[0] for q1, q2 in pairs])
        neural, bow = neural.astype(np.float64), bow.astype(np.float64)
        return {"neural": neural, "bow": bow, "model": self.combine(neural, bow)}
