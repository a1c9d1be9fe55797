"""How an exported encoder reads questions: one input adapter per model family, torch-free.

A model directory never names code to import. Which adapter serves it is read from the encoder
graph's input names in config.json, through :data:`ADAPTERS` — the one line a new family adds here.
Every adapter encodes a question as a tuple of id lists whose first two are the vocabulary's (title,
body) ids, capped as in training: they feed the bag-of-words score and key the sidecar's cache with
whatever ids the family adds. A ``pairwise`` adapter (a cross-encoder's) feeds its graph (query,
candidate) pairs (``pair_feed``) instead of single questions (``feed``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from es_plugin_bridge.core.model_config import PAIR_INPUTS, SUBWORD_INPUTS, VOCABULARY_INPUTS, ExportedConfig
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.inputs.pair import PairInputs
from es_plugin_bridge.serving.inputs.subword import SubwordInputs
from es_plugin_bridge.serving.inputs.vocabulary import Encoded, VocabularyInputs
from es_plugin_bridge.text import Preprocessor


class EncoderInputs(Protocol):
    """Questions → the ids a family's encoder reads → the graph's feed."""

    #: Whether the graph reads (query, candidate) pairs (``PairInputs.pair_feed``), not one question each.
    pairwise: bool

    def encode(self, questions: Sequence[Question]) -> list[Encoded]:
        """One tuple of id lists per question: vocabulary title ids, body ids, then the family's own."""
        ...

    def feed(self, encoded: Sequence[Encoded]) -> dict[str, np.ndarray]:
        """The onnxruntime feed of one batch of encoded questions."""
        ...


#: ``load(path, config, vocab, preprocessor, files)`` of an adapter: files are the manifest-verified bytes.
Loader = Callable[[Path, ExportedConfig, Vocabulary, Preprocessor, Mapping[str, bytes]], EncoderInputs]

#: The encoder graph's input names → the adapter that feeds them.
ADAPTERS: dict[tuple[str, ...], Loader] = {
    VOCABULARY_INPUTS: VocabularyInputs.load,
    SUBWORD_INPUTS: SubwordInputs.load,
    PAIR_INPUTS: PairInputs.load,
}


def input_adapter(path: Path, config: ExportedConfig, vocab: Vocabulary, preprocessor: Preprocessor,
                  files: Mapping[str, bytes]) -> EncoderInputs:
    """The adapter for ``config.inputs``; UserError naming the inputs when no family reads them."""
    load = ADAPTERS.get(tuple(config.inputs))
    if load is None:
        known = "; ".join(str(list(names)) for names in ADAPTERS)
        raise UserError(f"{path / 'config.json'}: the encoder's inputs {list(config.inputs)} are none this "
                        f"server reads (known: {known})")
    return load(path, config, vocab, preprocessor, files)


__all__ = ["ADAPTERS", "Encoded", "EncoderInputs", "PairInputs", "SubwordInputs", "VocabularyInputs",
           "input_adapter"]
