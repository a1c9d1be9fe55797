"""Questions → padded id tensors, the one input shape every model takes.

Each question is tokenised once (title and cut body separately) and its ids cached by question id,
so an epoch over many pairs re-uses the same work. ``max_title`` / ``max_body`` are model input
caps (the body is already cut to ``TextOptions.body_words`` by the text pipeline); they are stored
with the model so training, evaluation and the exported graphs see the same lengths.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from es_plugin_bridge.core.vocab import PAD_ID, Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.text import Preprocessor


class Featurizer:
    """Tokenises with a Preprocessor, maps tokens to ids with a Vocabulary, pads batches."""

    def __init__(
        self, preprocessor: Preprocessor, vocab: Vocabulary, max_title: int = 48, max_body: int = 100
    ) -> None:
        self.preprocessor = preprocessor
        self.vocab = vocab
        self.max_title = max_title
        self.max_body = max_body
        self._cache: dict[str, tuple[list[int], list[int]]] = {}

    def ids(self, question: Question) -> tuple[list[int], list[int]]:
        """Title ids and body ids of one question (cached by id)."""
        hit = self._cache.get(question.id)
        if hit is None:
            title = self.vocab.ids(self.preprocessor.title_tokens(question))[: self.max_title]
            body = self.vocab.ids(self.preprocessor.body_tokens(question))[: self.max_body]
            hit = (title, body)
            self._cache[question.id] = hit
        return hit

    def tokens(self, question: Question) -> list[str]:
        """Title + body tokens (for the bag-of-words path of non-BOW models and for the first stage)."""
        return self.preprocessor.tokens(question)

    def batch(self, questions: Sequence[Question]) -> dict[str, torch.Tensor]:
        """The four tensors of ``QuestionSimilarityModel.encode`` for ``questions``."""
        encoded = [self.ids(q) for q in questions]
        title_ids, title_mask = _pad([t for t, _ in encoded])
        body_ids, body_mask = _pad([b for _, b in encoded])
        return {
            "title_ids": title_ids,
            "title_mask": title_mask,
            "body_ids": body_ids,
            "body_mask": body_mask,
        }


def _pad(rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(1, max((len(r) for r in rows), default=0))
    ids = np.full((len(rows), width), PAD_ID, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=bool)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = True
    return torch.from_numpy(ids), torch.from_numpy(mask)
