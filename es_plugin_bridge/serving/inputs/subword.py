"""A transformer reads the sub-word ids of its own ``tokenizer.json``, run on the preprocessed title
and cut body (``serving.tokenizer``); the vocabulary's title and body ids still feed the bag of words.

A question's encoding is therefore (title ids, body ids, sub-word ids): the first two feed the bag of
words, the third the encoder, and all three key the sidecar's encoding cache. ``tokenizers`` only: no
torch, no ``transformers``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from es_plugin_bridge.core.model_config import ExportedConfig
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.inputs.vocabulary import Encoded
from es_plugin_bridge.serving.tokenizer import TOKENIZER, SubwordTokenizer
from es_plugin_bridge.text import Preprocessor


@dataclass(frozen=True)
class SubwordInputs:
    """(input_ids, attention_mask) from the model's tokenizer, padded to the batch's longest row.

    ``special_tokens``: whether each question's ids are framed by [CLS] … [SEP] (False: it is one side
    of a pair, ``serving.inputs.pair``).
    """

    pairwise: ClassVar[bool] = False

    names: tuple[str, ...]
    preprocessor: Preprocessor
    vocab: Vocabulary
    tokenizer: SubwordTokenizer
    max_title: int
    max_body: int
    special_tokens: bool = True

    @classmethod
    def load(cls, path: Path, config: ExportedConfig, vocab: Vocabulary, preprocessor: Preprocessor,
             files: Mapping[str, bytes]) -> SubwordInputs:
        """The tokenizer read from the manifest-verified bytes; UserError when config.json names none."""
        spec = config.tokenizer
        if spec is None:
            raise UserError(f"{path / 'config.json'}: the encoder reads sub-word ids but names no tokenizer")
        if spec.file not in files:
            raise UserError(f"{path}: config.json names a tokenizer but {TOKENIZER} is not in the manifest")
        tokenizer = SubwordTokenizer.from_bytes(files[spec.file], str(path / spec.file), spec.max_length)
        return cls(tuple(config.inputs), preprocessor, vocab, tokenizer, config.max_title, config.max_body)

    def encode(self, questions: Sequence[Question]) -> list[Encoded]:
        """Vocabulary title and body ids (capped as in training) and the encoder's sub-word ids."""
        parts = [(self.preprocessor.title_tokens(q), self.preprocessor.body_tokens(q)) for q in questions]
        subwords = self.tokenizer.ids([" ".join(title + body) for title, body in parts], self.special_tokens)
        return [(self.vocab.ids(title)[: self.max_title], self.vocab.ids(body)[: self.max_body], row)
                for (title, body), row in zip(parts, subwords, strict=True)]

    def feed(self, encoded: Sequence[Encoded]) -> dict[str, np.ndarray]:
        ids, mask = self.tokenizer.pad([e[2] for e in encoded])
        return {self.names[0]: ids, self.names[1]: mask}


__all__ = ["SubwordInputs"]
