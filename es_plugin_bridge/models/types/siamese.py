"""The attentive Siamese LSTM paper (004): its Siamese LSTM and CNN (Sections 5.3–5.4: LSTM 50, 32
filters of width 3, dropout 0.5, Manhattan similarity), trained with MSE on 0/1 labels."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from es_plugin_bridge.models.hyper import VocabularyHyper
from es_plugin_bridge.models.registry import ModelType, Recipe, measured_best, register_types


class SiameseLSTMHyper(VocabularyHyper):
    hidden_dim: int = Field(50, ge=1)
    attention_dim: int = Field(50, ge=1)
    similarity: Literal["cosine", "manhattan"] = "manhattan"


class SiameseCNNHyper(VocabularyHyper):
    num_filters: int = Field(32, ge=1)
    kernel_sizes: tuple[int, ...] = Field((3,), min_length=1)
    dense_dim: int = Field(50, ge=1)
    dropout: float = Field(0.5, ge=0.0, lt=1.0)
    similarity: Literal["cosine", "manhattan"] = "manhattan"


_PAPER = "attentive Siamese LSTM (paper 004)"
_RECIPE = Recipe("mse", "adadelta", 1.0, clip=1.25, batch_size=64)

register_types(
    ModelType("siamese-lstm", _PAPER, SiameseLSTMHyper, _RECIPE,
              "es_plugin_bridge.models.attentive_lstm:AttentiveLSTMEncoder",
              best_recipe=measured_best(_RECIPE), fusion_fit="epoch-data"),
    ModelType("siamese-cnn", _PAPER, SiameseCNNHyper, _RECIPE,
              "es_plugin_bridge.models.siamese_cnn:SiameseCNNEncoder",
              best_recipe=measured_best(_RECIPE), fusion_fit="epoch-data"),
    order=30,
)
