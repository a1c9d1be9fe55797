"""Lei et al. 2016: RCNN, and the LSTM and GRU it was compared with (Table 3: hidden 400 / 240 / 280,
n = 2), with their best pooling (Table 2) and title/body averaging. All three can be pre-trained as an
encoder-decoder (Section 4.2)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from es_plugin_bridge.models.hyper import VocabularyHyper
from es_plugin_bridge.models.registry import ModelType, Recipe, measured_best, register_types


class RCNNHyper(VocabularyHyper):
    hidden_dim: int = Field(400, ge=1)
    order: int = Field(2, ge=1, le=5)
    pooling: Literal["last", "mean"] = "last"
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    text_combine: Literal["concat", "average"] = "average"


class LSTMHyper(VocabularyHyper):
    hidden_dim: int = Field(240, ge=1)
    pooling: Literal["last", "mean"] = "mean"
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    text_combine: Literal["concat", "average"] = "average"


class GRUHyper(LSTMHyper):
    hidden_dim: int = Field(280, ge=1)


_PAPER = "Lei et al. 2016"
_RECIPE = Recipe("max-margin", "adam", 1e-3)
_RECURRENT = "es_plugin_bridge.models.recurrent:RecurrentEncoder"

register_types(
    ModelType("rcnn", _PAPER, RCNNHyper, _RECIPE, "es_plugin_bridge.models.rcnn:RCNNEncoder",
              best_recipe=measured_best(_RECIPE), pretrainable=True, fusion_fit="epoch-data"),
    ModelType("lstm", _PAPER, LSTMHyper, _RECIPE, _RECURRENT, {"cell": "lstm"},
              best_recipe=measured_best(_RECIPE), pretrainable=True, fusion_fit="epoch-data"),
    ModelType("gru", _PAPER, GRUHyper, _RECIPE, _RECURRENT, {"cell": "gru"},
              best_recipe=measured_best(_RECIPE), pretrainable=True, fusion_fit="epoch-data"),
    order=20,
)
