"""The papers' family: encoders over the product's own vocabulary (BOW-CNN, CNN, RCNN, LSTM, GRU and
the attentive Siamese LSTM / CNN).

Built by ``models.build_model`` with word vectors from ``--embeddings``, skip-gram word2vec on the
training text (the measured recipes) or random ones; fed the title and body ids of the
:class:`Featurizer`; exported as (title_ids, title_mask, body_ids, body_mask) → vector. Tracing
freezes Python control flow on shapes, so the graph with dynamic lengths is kept only when it matches
torch on every probe shape (caps, a batch's own widths, titles only, one question); otherwise it is
exported again at the fixed caps, which every type supports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from es_plugin_bridge.core.model_config import VOCABULARY_INPUTS
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models import build_model
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.training.embeddings import embedding_matrix, word2vec_matrix
from es_plugin_bridge.training.families import register_family
from es_plugin_bridge.training.families.base import BuildSetup, Built, ModelFamily, Probe
from es_plugin_bridge.training.featurize import Featurizer


class _Encoder(torch.nn.Module):
    """Flat-tensor wrapper: the four inputs → the neural vector."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, title_ids, title_mask, body_ids, body_mask):  # noqa: ANN001, ANN201
        return self.model.encode(title_ids, title_mask, body_ids, body_mask)["neural"]


class VocabularyFamily(ModelFamily):
    name = "vocabulary"
    inputs = VOCABULARY_INPUTS
    length_modes = (True, False)

    def build(self, setup: BuildSetup) -> Built:
        cfg, vocab = setup.options, setup.vocab
        if cfg.init:
            raise UserError(f"--init applies to the transformer type, not {cfg.model_type}")
        if cfg.embeddings or not setup.word2vec:
            matrix = embedding_matrix(vocab, cfg.embeddings, None if cfg.embeddings else cfg.embedding_dim,
                                      seed=cfg.seed)
            info: dict[str, Any] = {"source": cfg.embeddings or "random"}
        else:
            matrix, info = word2vec_matrix(vocab, setup.sentences(), cfg.embedding_dim, cfg.seed)
        model = build_model(cfg.model_type, len(vocab), embedding_dim=int(matrix.shape[1]), embeddings=matrix,
                            idf=vocab.idf, **cfg.hyper)
        featurizer = self.featurizer(model, setup.preprocessor, vocab, cfg.max_title, cfg.max_body)
        return Built(model, featurizer, info)

    def rebuild(self, directory: Path, model_config: dict[str, Any]) -> Any:
        return build_model(**model_config)

    def featurizer(self, model: Any, preprocessor: Preprocessor, vocab: Vocabulary, max_title: int,
                   max_body: int) -> Featurizer:
        return Featurizer(preprocessor, vocab, max_title, max_body)

    def onnx_module(self, model: Any) -> torch.nn.Module:
        return _Encoder(model)

    def trace_batch(self, featurizer: Featurizer, questions: list[Question]) -> dict[str, torch.Tensor]:
        return self.probe_feed(featurizer, Probe("trace", questions, True))

    def dynamic_axes(self, dynamic: bool) -> dict[str, dict[int, str]]:
        return {name: {0: "batch", 1: f"{name.split('_')[0]}_length"} if dynamic else {0: "batch"}
                for name in self.inputs}

    def probes(self, questions: list[Question]) -> list[Probe]:
        titles = [Question(f"{q.id}#title-only", q.title, "") for q in questions[:16]]
        return [
            Probe("caps", questions, True),
            Probe("natural", questions, False),
            Probe("titles", titles, False),
            Probe("single", questions[:1], False),
        ]

    def probe_feed(self, featurizer: Featurizer, probe: Probe) -> dict[str, torch.Tensor]:
        """The featurizer's batch, padded to ``max_title`` / ``max_body`` when the probe is fixed."""
        batch = featurizer.batch(probe.questions)
        if not probe.fixed:
            return batch
        caps = {"title": featurizer.max_title, "body": featurizer.max_body}
        return {key: torch.nn.functional.pad(value, (0, caps[key.split("_")[0]] - value.shape[1]))
                for key, value in batch.items()}


register_family(VocabularyFamily())

__all__ = ["VocabularyFamily"]
