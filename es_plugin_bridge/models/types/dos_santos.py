"""dos Santos et al. 2015: BOW-CNN and CNN (Table 2: window 3; 400 and 1000 conv units).

Bogdanova et al. 2015's CNN is ``cnn`` with ``pooling="sum", conv_units=300``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from es_plugin_bridge.models.hyper import VocabularyHyper
from es_plugin_bridge.models.registry import ModelType, Recipe, measured_best, register_types


class CNNHyper(VocabularyHyper):
    window: int = Field(3, ge=1, le=15)
    conv_units: int = Field(1000, ge=1)
    pooling: Literal["max", "sum"] = "max"


class BowCNNHyper(CNNHyper):
    conv_units: int = Field(400, ge=1)
    bow_init: Literal["idf", "ones"] = "idf"
    bow_trainable: bool = True
    beta_init: tuple[float, float] = (1.0, 1.0)


_PAPER = "dos Santos et al. 2015"
_CONV = "es_plugin_bridge.models.cnn:ConvEncoder"
_BOW_CNN_PAPER = Recipe("logistic", "sgd", 0.01)
_CNN_PAPER = Recipe("logistic", "sgd", 0.05)

register_types(
    ModelType("bow-cnn", _PAPER, BowCNNHyper, _BOW_CNN_PAPER, _CONV,
              best_recipe=measured_best(_BOW_CNN_PAPER, optimizer="adam", lr=1e-3), learned_bow=True,
              fusion_fit="epoch-data"),
    ModelType("cnn", f"{_PAPER}; Bogdanova et al. 2015", CNNHyper, _CNN_PAPER, _CONV,
              best_recipe=measured_best(_CNN_PAPER, optimizer="adam", lr=1e-3), fusion_fit="epoch-data"),
    order=10,
)
