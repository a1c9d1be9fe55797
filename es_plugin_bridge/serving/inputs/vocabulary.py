"""The papers' encoders read the vocabulary ids of a question's title and body, with their masks.

Ids are capped at ``max_title`` / ``max_body`` exactly as the training featurizer caps them; a graph
exported at fixed lengths is fed at the caps, a dynamic one at the batch's own widths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from es_plugin_bridge.core.model_config import ExportedConfig
from es_plugin_bridge.core.vocab import PAD_ID, Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.text import Preprocessor

Encoded = tuple[list[int], ...]  # vocabulary title ids, body ids[, a family's own ids]


@dataclass(frozen=True)
class VocabularyInputs:
    """(title_ids, title_mask, body_ids, body_mask) from the product's vocabulary."""

    pairwise: ClassVar[bool] = False

    names: tuple[str, ...]
    preprocessor: Preprocessor
    vocab: Vocabulary
    max_title: int
    max_body: int
    dynamic_length: bool

    @classmethod
    def load(cls, path: Path, config: ExportedConfig, vocab: Vocabulary, preprocessor: Preprocessor,
             files: Mapping[str, bytes]) -> VocabularyInputs:
        return cls(tuple(config.inputs), preprocessor, vocab, config.max_title, config.max_body,
                   config.dynamic_length)

    def encode(self, questions: Sequence[Question]) -> list[Encoded]:
        """Title and body ids of each question, capped as the training featurizer caps them."""
        return [(self.vocab.ids(self.preprocessor.title_tokens(q))[: self.max_title],
                 self.vocab.ids(self.preprocessor.body_tokens(q))[: self.max_body]) for q in questions]

    def feed(self, encoded: Sequence[Encoded]) -> dict[str, np.ndarray]:
        feed: dict[str, np.ndarray] = {}
        for part, cap in ((0, self.max_title), (1, self.max_body)):
            rows = [e[part] for e in encoded]
            width = max(1, max(len(r) for r in rows)) if self.dynamic_length else cap
            ids = np.full((len(rows), width), PAD_ID, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=bool)
            for i, row in enumerate(rows):
                ids[i, : len(row)] = row
                mask[i, : len(row)] = True
            feed[self.names[2 * part]], feed[self.names[2 * part + 1]] = ids, mask
        return feed


__all__ = ["Encoded", "VocabularyInputs"]
