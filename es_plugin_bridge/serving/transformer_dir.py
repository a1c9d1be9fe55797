"""A transformer's model directory: the ONNX encoder reads sub-word ids from ``tokenizer.json``.

Same directory and scores as the papers' models (``model_dir.ModelDirectory``: manifest, config, the
vocabulary and IDF weights of the bag-of-words component, fusion β, calibration); only the encoder's
inputs differ: ``input_ids`` / ``attention_mask`` from the model's own tokenizer, run on the
preprocessed title and cut body (``serving.tokenizer``), instead of the vocabulary's title and body ids.
A question's ``token_ids`` are therefore (title ids, body ids, sub-word ids): the first two feed the
bag of words, the third the encoder, and all three key the sidecar's encoding cache.
onnxruntime and ``tokenizers`` only: no torch, no ``transformers``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.model_dir import BagOfWords, ModelDirectory
from es_plugin_bridge.serving.tokenizer import TOKENIZER, SubwordTokenizer

Encoded = tuple[list[int], list[int], list[int]]  # vocabulary title ids, body ids; sub-word ids


class TransformerModelDirectory(ModelDirectory):
    """A :class:`ModelDirectory` whose encoder takes sub-word ids (see the module docstring)."""

    tokenizer: SubwordTokenizer

    def _parts(self, question: Question) -> tuple[list[str], list[str]]:
        return self.preprocessor.title_tokens(question), self.preprocessor.body_tokens(question)

    def _encoded(self, questions: Sequence[Question]) -> list[Encoded]:
        parts = [self._parts(q) for q in questions]
        subwords = self.tokenizer.ids([" ".join(title + body) for title, body in parts])
        caps = self.config.max_title, self.config.max_body
        return [
            (self.vocab.ids(title)[: caps[0]], self.vocab.ids(body)[: caps[1]], row)
            for (title, body), row in zip(parts, subwords, strict=True)
        ]

    def token_ids(self, question: Question) -> Encoded:  # type: ignore[override]
        """Vocabulary title and body ids (capped as in training) and the encoder's sub-word ids."""
        return self._encoded([question])[0]

    def vectors(self, questions: Sequence[Question]) -> np.ndarray:
        return self.vectors_from_ids(self._encoded(questions))

    def vectors_from_ids(self, encoded: Sequence[Sequence[list[int]]]) -> np.ndarray:
        """Unit vectors [N, D] float32 of already tokenised questions, in batches of ``batch_size``."""
        out = np.zeros((len(encoded), self.dimension), dtype=np.float32)
        names = self.config.inputs
        for start in range(0, len(encoded), self.batch_size):
            chunk = encoded[start : start + self.batch_size]
            ids, mask = self.tokenizer.pad([e[2] for e in chunk])
            out[start : start + len(chunk)] = self.session.run([self.config.output],
                                                               {names[0]: ids, names[1]: mask})[0]
        return out

    def bag_of_words(self, question: Question) -> BagOfWords:
        title, body, _ = self.token_ids(question)
        return self.bag_from_ids(title, body)

    def bags_from_ids(self, encoded: Sequence[Sequence[list[int]]]) -> list[BagOfWords]:
        return super().bags_from_ids([(e[0], e[1]) for e in encoded])


def with_tokenizer(base: ModelDirectory, files: dict[str, bytes]) -> TransformerModelDirectory:
    """``base`` (just loaded) as a transformer directory, its tokenizer read from the verified bytes."""
    spec = base.config.tokenizer
    assert spec is not None
    if spec.file not in files:
        raise UserError(f"{base.path}: config.json names a tokenizer but {TOKENIZER} is not in the manifest")
    if len(base.config.inputs) != 2:
        raise UserError(f"{base.path}: a transformer's encoder takes 2 inputs, config.json lists "
                        f"{list(base.config.inputs)}")
    loaded = TransformerModelDirectory(base.path, base.config, base.vocab, base.bow_weights, base.session,
                                       base.batch_size)
    source = str(base.path / spec.file)
    loaded.tokenizer = SubwordTokenizer.from_bytes(files[spec.file], source, spec.max_length)
    return loaded


__all__ = ["TransformerModelDirectory", "with_tokenizer"]
