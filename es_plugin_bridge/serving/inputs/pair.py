"""A cross-encoder reads a (query, candidate) pair as one sequence, ``[CLS] query [SEP] candidate [SEP]``
with segment ids 0 then 1: BERT's sentence-pair layout, the one its pre-training used.

Each question is tokenised once, alone and without special tokens: that is its *side* of any pair, so
the sidecar's cache keeps it and a candidate seen before is neither preprocessed nor tokenised again
(the pair itself must run through the graph for every query). A pair is two sides cut longest-first to
the model's ``max_length`` and framed by :class:`PairLayout`, the one function the PyTorch model
(``models.cross_encoder``) and this adapter both call, so training, export and serving build the same
ids. The vocabulary's title and body ids still feed the bag of words. ``tokenizers`` only: no torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from es_plugin_bridge.core.model_config import ExportedConfig
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.inputs.subword import SubwordInputs
from es_plugin_bridge.serving.inputs.vocabulary import Encoded
from es_plugin_bridge.serving.tokenizer import TOKENIZER, SubwordTokenizer
from es_plugin_bridge.text import Preprocessor

Side = Sequence[int]  # one question's sub-word ids, no special tokens
#: The pair rows :meth:`PairLayout.batch` builds, in the order the pair graph takes them.
PAIR_ROWS = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class PairLayout:
    """How two sides become one pair row: special token ids, padding id and the pair's length cap."""

    cls_id: int
    sep_id: int
    pad_id: int
    max_length: int

    @classmethod
    def of(cls, tokenizer: SubwordTokenizer, source: str) -> PairLayout:
        """The layout of a BERT-style tokenizer; UserError when it has no [CLS] or [SEP] token."""
        ids = {name: tokenizer.tokenizer.token_to_id(name) for name in ("[CLS]", "[SEP]")}
        missing = [name for name, found in ids.items() if found is None]
        if missing:
            raise UserError(f"{source}: the tokenizer has no {' or '.join(missing)} token; a cross-encoder "
                            "reads [CLS] query [SEP] candidate [SEP] (a BERT-style tokenizer)")
        if tokenizer.max_length < 4:
            raise UserError(f"{source}: a pair needs max_length >= 4, got {tokenizer.max_length}")
        return cls(int(ids["[CLS]"]), int(ids["[SEP]"]), tokenizer.pad_id, tokenizer.max_length)

    def cut(self, first: int, second: int) -> tuple[int, int]:
        """Lengths kept of two sides: the longer side loses tokens first until the pair fits
        (``longest_first``; when both are cut, the first keeps the odd token)."""
        budget = self.max_length - 3  # [CLS], [SEP], [SEP]
        keep_second = min(second, max(budget - first, budget // 2))
        return min(first, budget - keep_second), keep_second

    def pair(self, first: Side, second: Side) -> tuple[list[int], list[int]]:
        """(input ids, segment ids) of one pair."""
        a, b = self.cut(len(first), len(second))
        ids = [self.cls_id, *first[:a], self.sep_id, *second[:b], self.sep_id]
        return ids, [0] * (a + 2) + [1] * (b + 1)

    def batch(self, pairs: Sequence[tuple[Side, Side]]) -> dict[str, np.ndarray]:
        """``input_ids``, ``attention_mask``, ``token_type_ids`` int64 [B, longest pair], padded right."""
        rows = [self.pair(a, b) for a, b in pairs]
        width = max(1, max((len(ids) for ids, _ in rows), default=0))
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        types = np.zeros((len(rows), width), dtype=np.int64)
        for i, (row, segments) in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
            types[i, : len(row)] = segments
        return dict(zip(PAIR_ROWS, (ids, mask, types), strict=True))


@dataclass(frozen=True)
class PairInputs:
    """Questions → (title ids, body ids, side); (query side, candidate side) pairs → the pair graph's feed."""

    pairwise: ClassVar[bool] = True

    names: tuple[str, ...]
    sides: SubwordInputs
    layout: PairLayout

    @classmethod
    def load(cls, path: Path, config: ExportedConfig, vocab: Vocabulary, preprocessor: Preprocessor,
             files: Mapping[str, bytes]) -> PairInputs:
        """The tokenizer as for a transformer (without special tokens per side) and its pair layout."""
        sides = SubwordInputs.load(path, config, vocab, preprocessor, files)
        layout = PairLayout.of(sides.tokenizer, str(path / TOKENIZER))
        return cls(tuple(config.inputs), dataclasses.replace(sides, special_tokens=False), layout)

    def encode(self, questions: Sequence[Question]) -> list[Encoded]:
        """Vocabulary title and body ids (capped as in training) and the question's side of a pair."""
        return self.sides.encode(questions)

    @staticmethod
    def side(encoded: Encoded) -> np.ndarray:
        """The part of an encoding a pair reads (what the sidecar keeps per question)."""
        return np.asarray(encoded[2], dtype=np.int64)

    def feed(self, encoded: Sequence[Encoded]) -> dict[str, np.ndarray]:
        raise UserError("a cross-encoder reads (query, document) pairs: it has no input for one text alone")

    def pair_feed(self, pairs: Sequence[tuple[Side, Side]]) -> dict[str, np.ndarray]:
        """The onnxruntime feed of (query side, candidate side) pairs."""
        batch = self.layout.batch(pairs)
        return dict(zip(self.names, (batch[name] for name in PAIR_ROWS), strict=True))


__all__ = ["PAIR_ROWS", "PairInputs", "PairLayout", "Side"]
