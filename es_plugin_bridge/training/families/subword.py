"""The sub-word family: a pretrained sentence-transformers bi-encoder (``models.transformer``).

Built from ``--init DIR`` or the packaged all-MiniLM-L6-v2; fed its own tokenizer's ``input_ids`` /
``attention_mask`` (:class:`SubwordFeaturizer`); a checkpoint adds the network's config and
``tokenizer.json`` so it rebuilds without the init directory; the exported graph takes the two sub-word
inputs with dynamic batch and length, and the directory adds ``tokenizer.json`` (read by the sidecar's
``serving.inputs.subword``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tokenizers
import torch

from es_plugin_bridge.core.model_config import SUBWORD_INPUTS, SubwordConfig
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.tokenizer import TOKENIZER, SubwordTokenizer, question_text
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.training.families import register_family
from es_plugin_bridge.training.families.base import BuildSetup, Built, ModelFamily, Probe
from es_plugin_bridge.training.featurize import Featurizer


class SubwordFeaturizer(Featurizer):
    """``batch`` gives the transformer's sub-word ``input_ids`` / ``attention_mask``.

    ``ids`` stays the vocabulary's (title, body) ids: the bag-of-words component that fusion uses is
    the same IDF-weighted BOW as for the other non-BOW types. The text the transformer reads is the
    preprocessed title and cut body (``serving.tokenizer.question_text``), tokenised by the model's own
    ``tokenizer.json`` — the same class the sidecar uses.
    """

    def __init__(
        self,
        preprocessor: Preprocessor,
        vocab: Vocabulary,
        tokenizer: SubwordTokenizer,
        max_title: int = 48,
        max_body: int = 100,
    ) -> None:
        super().__init__(preprocessor, vocab, max_title, max_body)
        self.tokenizer = tokenizer
        self._subwords: dict[str, list[int]] = {}

    #: Whether each question's ids are framed by [CLS] … [SEP] (a pair's sides are not: ``families.pair``).
    special_tokens = True

    def subword_ids(self, questions: Sequence[Question]) -> list[list[int]]:
        """Sub-word ids of each question (cached by id; new ones tokenised in one batch)."""
        todo = list({q.id: q for q in questions if q.id not in self._subwords}.values())
        if todo:
            texts = [question_text(self.preprocessor, q) for q in todo]
            for q, row in zip(todo, self.tokenizer.ids(texts, self.special_tokens), strict=True):
                self._subwords[q.id] = row
        return [self._subwords[q.id] for q in questions]

    def batch(self, questions: Sequence[Question]) -> dict[str, torch.Tensor]:
        ids, mask = self.tokenizer.pad(self.subword_ids(questions))
        return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}


class _SubwordEncoder(torch.nn.Module):
    """The transformer's pooled, normalised vector from its two inputs."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):  # noqa: ANN001, ANN201
        return self.model.encode(input_ids, attention_mask)["neural"]


class SubwordFamily(ModelFamily):
    name = "subword"
    inputs = SUBWORD_INPUTS
    starts_pretrained = True

    def build(self, setup: BuildSetup) -> Built:
        from es_plugin_bridge.models.transformer import build_transformer

        cfg = setup.options
        if cfg.embeddings:
            raise UserError("--embeddings do not apply to the transformer type (it has its own)")
        model = build_transformer(cfg.init, **cfg.hyper)
        featurizer = self.featurizer(model, setup.preprocessor, setup.vocab, cfg.max_title, cfg.max_body)
        return Built(model, featurizer, {})

    def rebuild(self, directory: Path, model_config: dict[str, Any]) -> Any:
        from es_plugin_bridge.models.transformer import transformer_from_checkpoint

        return transformer_from_checkpoint(directory, model_config)

    def featurizer(self, model: Any, preprocessor: Preprocessor, vocab: Vocabulary, max_title: int,
                   max_body: int) -> Featurizer:
        return SubwordFeaturizer(preprocessor, vocab, model.tokenizer, max_title, max_body)

    def save_files(self, model: Any, out: Path) -> None:
        """The network's config and the tokenizer, beside the checkpoint's weights."""
        from es_plugin_bridge.models.transformer import NETWORK_CONFIG

        (out / NETWORK_CONFIG).write_text(json.dumps(model.network_config, indent=2, sort_keys=True) + "\n",
                                          encoding="utf-8")
        (out / TOKENIZER).write_text(model.tokenizer.to_str(), encoding="utf-8")

    def onnx_module(self, model: Any) -> torch.nn.Module:
        return _SubwordEncoder(model)

    def trace_batch(self, featurizer: Featurizer, questions: list[Question]) -> dict[str, torch.Tensor]:
        return featurizer.batch(questions[:8])

    def dynamic_axes(self, dynamic: bool) -> dict[str, dict[int, str]]:
        return {name: {0: "batch", 1: "length"} for name in self.inputs}

    def probes(self, questions: list[Question]) -> list[Probe]:
        """Batches of natural widths (padding differs per batch)."""
        titles = [Question(f"{q.id}#title-only", q.title, "") for q in questions[:16]]
        return [Probe("natural", questions, False), Probe("titles", titles, False),
                Probe("single", questions[:1], False)]

    def export_files(self, model: Any, out: Path) -> None:
        (out / TOKENIZER).write_text(model.tokenizer.to_str(), encoding="utf-8")

    def exported_config(self, model: Any) -> dict[str, Any]:
        return {"inputs": self.inputs, "tokenizer": SubwordConfig(max_length=model.tokenizer.max_length),
                "versions": {"tokenizers": tokenizers.__version__}}


register_family(SubwordFamily())

__all__ = ["SubwordFamily", "SubwordFeaturizer"]
