"""Sub-word tokenisation of transformer models: a ``tokenizer.json`` read by Hugging Face ``tokenizers``.

Training, export and the sidecar all go through this one class, so a question becomes the same ids
everywhere. The text a transformer reads is the product's own preprocessing (HTML to text, code and
links as the text options say, the body cut at ``body_words``) joined by spaces: title tokens, then
body tokens. ``tokenizer.json`` is plain JSON (normaliser, pre-tokeniser, WordPiece vocabulary, special
tokens): loading it runs no code and needs neither torch nor ``transformers``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tokenizers import Tokenizer

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text import Preprocessor

TOKENIZER = "tokenizer.json"


def question_text(preprocessor: Preprocessor, question: Question) -> str:
    """What the transformer reads of a question: its preprocessed title and cut body tokens."""
    return " ".join(preprocessor.tokens(question))


class SubwordTokenizer:
    """A ``tokenizers.Tokenizer`` truncating to ``max_length`` sub-words ([CLS] and [SEP] included)."""

    def __init__(self, tokenizer: Tokenizer, max_length: int) -> None:
        tokenizer.no_padding()  # batches are padded here, to their own longest row
        tokenizer.enable_truncation(max_length)
        self.tokenizer = tokenizer
        self.max_length = max_length
        pad = tokenizer.token_to_id("[PAD]")
        self.pad_id = 0 if pad is None else int(pad)

    @classmethod
    def from_bytes(cls, data: bytes, source: str, max_length: int) -> SubwordTokenizer:
        """Parse a tokenizer.json; UserError naming ``source`` when it is not one."""
        try:
            return cls(Tokenizer.from_str(data.decode("utf-8")), max_length)
        except Exception as exc:  # tokenizers raises plain Exception on a bad file
            raise UserError(f"{source}: not a valid Hugging Face tokenizer.json ({exc})") from None

    @classmethod
    def from_file(cls, path: str, max_length: int) -> SubwordTokenizer:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise UserError(f"{path}: cannot read the tokenizer ({exc.strerror})") from None
        return cls.from_bytes(data, path, max_length)

    def to_str(self) -> str:
        """The tokenizer.json text, truncation included (what the model directory stores)."""
        return self.tokenizer.to_str()

    def ids(self, texts: Sequence[str], special_tokens: bool = True) -> list[list[int]]:
        """Sub-word ids of each text, cut at ``max_length``; with ``special_tokens`` ([CLS] … [SEP])
        added, without them for a text that is one side of a pair (``serving.inputs.pair`` adds its own)."""
        encoded = self.tokenizer.encode_batch(list(texts), add_special_tokens=special_tokens)
        return [list(e.ids) for e in encoded]

    def pad(self, rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
        """(input_ids, attention_mask) int64 [B, longest row], padded on the right."""
        width = max(1, max((len(r) for r in rows), default=0))
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        return ids, mask


__all__ = ["TOKENIZER", "SubwordTokenizer", "question_text"]
