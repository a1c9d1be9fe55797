"""The PyTorch backend of the scorer contract: a trained model scores with the sidecar's maths.

``NeuralScorer`` only encodes — the model's vectors in eval mode and the featurizer's bags of words,
weighted by the learned t for bow-cnn and the vocabulary's IDF for the other types (an untrained BOW
path, so ``fused`` has the same three inputs for all) — and inherits every score
(``neural``, ``bow``, ``model``) from ``serving.scorer.CachedScorer``, which computes it with
``core.scoring``: a checkpoint evaluated here scores as its export is served. A pairwise model (a
cross-encoder: ``model.pairwise``) is run on (query, candidate) pairs instead (``_pair_logits``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from es_plugin_bridge.core import scoring
from es_plugin_bridge.core.scoring import BagOfWords
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving.scorer import CachedScorer
from es_plugin_bridge.training.checkpoint import load_checkpoint
from es_plugin_bridge.training.featurize import Featurizer


def _beta(model: Any) -> tuple[float, float] | None:
    if model.beta is None:
        return None
    b1, b2 = (float(x) for x in model.beta.detach())
    return b1, b2


class NeuralScorer(CachedScorer):
    """A model and its featurizer in eval mode, with a cache of question vectors and bags of words."""

    def __init__(self, model: Any, featurizer: Featurizer, batch_size: int = 256,
                 fusion: dict[str, dict[str, float]] | None = None) -> None:
        self.model = model.eval()
        self.featurizer = featurizer
        self.batch_size = batch_size
        # The BOW weights t: learned for bow-cnn, the vocabulary's IDF for the other types.
        source = model.bow.weight.detach().cpu().numpy() if model.bow is not None else featurizer.vocab.idf
        self.bow_weights = np.asarray(source, dtype=np.float64)
        self._fusion = dict(fusion or {})
        super().__init__(model.similarity, _beta(model), len(self.bow_weights), int(model.output_dim),
                         bool(model.pairwise))

    @classmethod
    def from_dir(cls, directory: Path) -> NeuralScorer:
        """The checkpoint's model, featurizer and fusion β (``fusion.first_stages`` of its config)."""
        model, featurizer, config = load_checkpoint(directory)
        fits = (config.get("fusion") or {}).get("first_stages", {})
        return cls(model, featurizer, fusion={name: dict(fit["weights"]) for name, fit in fits.items()})

    @property
    def fusion(self) -> dict[str, dict[str, float]]:
        """Fusion β per first stage, as stored in the checkpoint's config.json (empty while training)."""
        return dict(self._fusion)

    @torch.no_grad()
    def _encode(self, questions: Sequence[Question]) -> np.ndarray:
        device = next(self.model.parameters()).device  # where the trainer put it (training.device)
        out = []
        for start in range(0, len(questions), self.batch_size):
            batch = self.featurizer.batch(questions[start : start + self.batch_size])
            encoded = self.model.encode(**{key: value.to(device) for key, value in batch.items()})
            out.append(encoded["neural"].float().cpu().numpy())
        return np.concatenate(out)

    @torch.no_grad()
    def _pair_logits(self, pairs: Sequence[tuple[Question, Question]]) -> np.ndarray:
        """The model's logit of each (query, candidate) pair, ``batch_size`` pairs a forward pass."""
        unique = list({q.id: q for pair in pairs for q in pair}.values())
        where = {q.id: i for i, q in enumerate(unique)}
        device = next(self.model.parameters()).device  # where the trainer put it (training.device)
        batch = self.featurizer.batch(unique)
        rows = self.model.encode(**{key: value.to(device) for key, value in batch.items()})  # own sub-words
        out = []
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start : start + self.batch_size]
            a = {k: v[torch.tensor([where[q.id] for q, _ in chunk], device=device)] for k, v in rows.items()}
            b = {k: v[torch.tensor([where[c.id] for _, c in chunk], device=device)] for k, v in rows.items()}
            out.append(self.model.score(a, b).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)

    def _bag(self, question: Question) -> BagOfWords:
        title, body = self.featurizer.ids(question)
        return scoring.bag_of_words(title, body, self.bow_weights)


__all__ = ["NeuralScorer"]
