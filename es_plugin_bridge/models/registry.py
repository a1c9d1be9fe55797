"""The one registry of model types: each type is one :class:`ModelType` entry.

An entry says everything the rest of the product needs to know about a type: its hyper-parameters
(a pydantic class with the papers' defaults), its training recipe (loss, optimiser, learning rate,
clipping, batch size), the encoder that builds it, and whether it can be pre-trained. The CLI's
choices, ``build_model``, the trainer's recipe, the papers' losses and the pre-training check are all
read from here, so adding a type is adding one entry (and its encoder class).

Torch-free on purpose: ``esrerank --help`` lists the types without loading torch. Encoders are named
by ``"module:Class"`` and imported only when a model is built.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.hyper import (
    BowCNNHyper,
    CNNHyper,
    CrossEncoderHyper,
    GRUHyper,
    LSTMHyper,
    RCNNHyper,
    SiameseCNNHyper,
    SiameseLSTMHyper,
    TransformerHyper,
)
from es_plugin_bridge.plugins import Registry

#: Every loss the trainer knows; the first three are the papers', ``in-batch`` is the transformer's.
LOSS_NAMES = ("logistic", "max-margin", "mse", "in-batch")
OPTIMIZERS = ("sgd", "adam", "adadelta", "adamw")


@dataclass(frozen=True)
class Recipe:
    """How a type is trained: loss and its constants, optimiser, learning rate, clipping, batch size,
    initial word vectors and when to stop.

    ``negatives``: sampled negatives per positive (ranking losses); ``scale``: the in-batch loss's
    logit scale (cosine × 20, as sentence-transformers' MultipleNegativesRankingLoss); ``warmup``:
    steps of linear learning-rate warm-up (0: none); ``examples_per_epoch``: the default cap of an
    epoch (the dev score is checked after each), None for the whole training set; ``word2vec``: with
    no ``--embeddings``, start the word vectors from skip-gram word2vec trained on the training text
    (False: random); ``epochs`` / ``time_budget`` (seconds) / ``patience``: the default stopping rule.
    """

    loss: str
    optimizer: str
    lr: float
    clip: float | None = 5.0
    negatives: int = 20
    batch_size: int = 32
    margin: float = 1.0
    gamma: float = 10.0
    scale: float = 20.0
    warmup: int = 0
    examples_per_epoch: int | None = None
    word2vec: bool = False
    #: In-batch loss: BM25-mined negatives added per pair (the training question BM25 ranks highest for
    #: the query that is not a known duplicate), shared as extra columns by the whole batch.
    hard_negatives: int = 0
    epochs: int = 10
    time_budget: float | None = None
    patience: int = 3


#: The names ``--recipe`` takes: ``best`` (the default: the best this project measured per type) and
#: ``paper`` (the paper's own loss, optimiser, learning rate and 10 epochs, vectors as given).
RECIPE_NAMES = ("best", "paper")


@dataclass(frozen=True)
class ModelType:
    """One model type: name, source, hyper-parameters, recipes, encoder and what it supports."""

    name: str
    paper: str
    hyper: type[BaseModel]
    #: The paper's exact recipe (``--recipe paper``).
    paper_recipe: Recipe
    #: ``"module:Class"`` of the encoder; its keyword-only ``__init__`` arguments are taken from the
    #: hyper-parameters of the same name, plus ``encoder_args``.
    encoder: str
    encoder_args: Mapping[str, Any] = field(default_factory=dict)
    #: The default recipe (``--recipe best``); None: the paper's.
    best_recipe: Recipe | None = None
    #: The model family (``training.families``): ``vocabulary``, a :class:`QuestionSimilarityModel` over
    #: the product's vocabulary (``build_model``); ``subword``, a pretrained sub-word encoder with its own
    #: tokenizer (``models.transformer``); ``pair``, a pretrained network reading (query, candidate) pairs
    #: together (``models.cross_encoder``).
    family: str = "vocabulary"
    pretrainable: bool = False
    learned_bow: bool = False
    #: Which dev queries fit the fusion β and calibration by default (``train --fusion-fit``):
    #: ``held-out``, other queries than those that chose the epoch, where on unseen data that lost
    #: significantly nowhere and gained on average; ``epoch-data``, the same queries, elsewhere
    #: (``benchmarks/fusion_fit.json``, README "Fusion weights on unseen data").
    fusion_fit: str = "held-out"

    @property
    def recipe(self) -> Recipe:
        """The default recipe: the best measured one."""
        return self.best_recipe or self.paper_recipe

    def recipe_named(self, name: str) -> Recipe:
        if name not in RECIPE_NAMES:
            raise UserError(f"unknown recipe {name!r}; choose one of {', '.join(RECIPE_NAMES)}")
        return self.recipe if name == "best" else self.paper_recipe


def _best(paper: Recipe, **changes: Any) -> Recipe:
    """The measured default of a paper type: the paper's loss, word2vec on the training text, a
    10-minute budget checked every 640 examples with patience 5 (docs/training.md, "Default recipes")."""
    return replace(paper, **{"word2vec": True, "epochs": 1000, "time_budget": 600.0, "patience": 5,
                             "examples_per_epoch": 640, **changes})


_DOS_SANTOS = "dos Santos et al. 2015"
_LEI = "Lei et al. 2016"
_P004 = "attentive Siamese LSTM (paper 004)"
_LEI_RECIPE = Recipe("max-margin", "adam", 1e-3)
_P004_RECIPE = Recipe("mse", "adadelta", 1.0, clip=1.25, batch_size=64)
_CONV = "es_plugin_bridge.models.cnn:ConvEncoder"
_BOW_CNN_PAPER = Recipe("logistic", "sgd", 0.01)
_CNN_PAPER = Recipe("logistic", "sgd", 0.05)
# In-batch negatives (MultipleNegativesRankingLoss), AdamW with a short warm-up; the dev score of the
# pretrained model (epoch 0) competes with every fine-tuned epoch.
# Measured on the demo's AskUbuntu split (docs/training.md, "The transformer type"): lr 2e-5 with the
# symmetric loss raised dev MAP over the pretrained model where 1e-4 with BM25 hard negatives lowered it.
_TRANSFORMER = Recipe("in-batch", "adamw", 2e-5, clip=1.0, batch_size=32, warmup=50, examples_per_epoch=3200,
                      epochs=1000, time_budget=900.0, patience=3)

# A cross-encoder runs every (query, candidate) pair through the network, so a step of B positives with K
# sampled negatives costs B·(1 + K) pair passes: the papers' ranking loss (max-margin, δ = 1 on the pair
# logits, hardest of K) with few negatives, AdamW with the transformer's rate and warm-up.
_CROSS_ENCODER = Recipe("max-margin", "adamw", 2e-5, clip=1.0, negatives=4, batch_size=16, warmup=50,
                        examples_per_epoch=1600, epochs=1000, time_budget=900.0, patience=3)

#: ``fusion_fit`` where the held-out fit lost on unseen data (benchmarks/fusion_fit.json).
_SAME = "epoch-data"
#: Every model type by name: a fixed table (``package=None``), looked up like every other registry.
REGISTRY: Registry[ModelType] = Registry("model type", None)
for _entry in (
        ModelType("bow-cnn", _DOS_SANTOS, BowCNNHyper, _BOW_CNN_PAPER, _CONV,
                  best_recipe=_best(_BOW_CNN_PAPER, optimizer="adam", lr=1e-3), learned_bow=True,
                  fusion_fit=_SAME),
        ModelType("cnn", f"{_DOS_SANTOS}; Bogdanova et al. 2015", CNNHyper, _CNN_PAPER,
                  _CONV, best_recipe=_best(_CNN_PAPER, optimizer="adam", lr=1e-3), fusion_fit=_SAME),
        ModelType("rcnn", _LEI, RCNNHyper, _LEI_RECIPE, "es_plugin_bridge.models.rcnn:RCNNEncoder",
                  best_recipe=_best(_LEI_RECIPE), pretrainable=True, fusion_fit=_SAME),
        ModelType("lstm", _LEI, LSTMHyper, _LEI_RECIPE, "es_plugin_bridge.models.recurrent:RecurrentEncoder",
                  {"cell": "lstm"}, best_recipe=_best(_LEI_RECIPE), pretrainable=True, fusion_fit=_SAME),
        ModelType("gru", _LEI, GRUHyper, _LEI_RECIPE, "es_plugin_bridge.models.recurrent:RecurrentEncoder",
                  {"cell": "gru"}, best_recipe=_best(_LEI_RECIPE), pretrainable=True, fusion_fit=_SAME),
        ModelType("siamese-lstm", _P004, SiameseLSTMHyper, _P004_RECIPE,
                  "es_plugin_bridge.models.attentive_lstm:AttentiveLSTMEncoder",
                  best_recipe=_best(_P004_RECIPE), fusion_fit=_SAME),
        ModelType("siamese-cnn", _P004, SiameseCNNHyper, _P004_RECIPE,
                  "es_plugin_bridge.models.siamese_cnn:SiameseCNNEncoder", best_recipe=_best(_P004_RECIPE),
                  fusion_fit=_SAME),
        ModelType("transformer", "sentence-transformers bi-encoder (all-MiniLM-L6-v2 by default)",
                  TransformerHyper, _TRANSFORMER, "es_plugin_bridge.models.transformer:TransformerEncoder",
                  family="subword"),
        ModelType("cross-encoder", "BERT-style pair classifier (all-MiniLM-L6-v2's network by default)",
                  CrossEncoderHyper, _CROSS_ENCODER,
                  "es_plugin_bridge.models.cross_encoder:CrossEncoderModel", family="pair", fusion_fit=_SAME),
):
    REGISTRY.add(_entry.name, _entry)

#: Every type ``esrerank train`` takes.
ALL_TYPES = tuple(REGISTRY.names())
#: The papers' seven types (the vocabulary family, which :func:`~es_plugin_bridge.models.build_model`
#: builds over word vectors); ALL_TYPES adds the pretrained sub-word types (transformer, cross-encoder).
PAPER_TYPES = tuple(name for name, t in REGISTRY.items() if t.family == "vocabulary")
PRETRAINABLE_TYPES = tuple(name for name, t in REGISTRY.items() if t.pretrainable)


def model_type(name: str) -> ModelType:
    """The registry entry of ``name``; UserError listing the known types."""
    return REGISTRY.get(name)


def encoder_class(entry: ModelType) -> type:
    """Import the entry's encoder class (this is where torch gets loaded)."""
    module, _, name = entry.encoder.partition(":")
    return getattr(importlib.import_module(module), name)


def encoder_kwargs(entry: ModelType, hyper: BaseModel) -> dict[str, Any]:
    """The encoder's keyword-only arguments: hyper-parameters of the same name, then ``encoder_args``."""
    params = inspect.signature(encoder_class(entry).__init__).parameters.values()
    names = [p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
    kwargs = {name: getattr(hyper, name) for name in names if name in type(hyper).model_fields}
    return {**kwargs, **entry.encoder_args}


def hyper_class(name: str) -> type[BaseModel]:
    """The hyper-parameter class of a registered type; UserError for an unknown type."""
    return model_type(name).hyper


def parse_hyper(model_type: str, hyper: dict[str, Any]) -> BaseModel:
    """Validated hyper-parameters for ``model_type``; UserError naming the bad or unknown parameter."""
    cls = hyper_class(model_type)
    try:
        return cls(**hyper)
    except ValidationError as error:
        first = error.errors()[0]
        name = ".".join(str(part) for part in first["loc"]) or "?"
        if first["type"] == "extra_forbidden":
            known = ", ".join(sorted(cls.model_fields))
            raise UserError(
                f"unknown hyper-parameter {name!r} for model type {model_type!r} (known: {known})"
            ) from None
        raise UserError(
            f"bad hyper-parameter {name!r} for model type {model_type!r}: {first['msg']} "
            f"(got {first.get('input')!r})"
        ) from None


def hyper_defaults(model_type: str) -> dict[str, Any]:
    """The default hyper-parameters of a model type, JSON-ready."""
    return hyper_class(model_type)().model_dump(mode="json")


__all__ = ["ALL_TYPES", "LOSS_NAMES", "PAPER_TYPES", "OPTIMIZERS", "PRETRAINABLE_TYPES", "RECIPE_NAMES",
           "REGISTRY", "ModelType", "Recipe", "encoder_class", "encoder_kwargs", "hyper_class",
           "hyper_defaults", "model_type", "parse_hyper"]
