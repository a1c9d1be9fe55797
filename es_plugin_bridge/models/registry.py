"""The one registry of model types: each type is one :class:`ModelType` entry.

An entry says everything the rest of the product needs to know about a type: its hyper-parameters
(a pydantic class with the papers' defaults), its training recipe (loss, optimiser, learning rate,
clipping, batch size), the encoder that builds it, and whether it can be pre-trained. The CLI's
choices, ``build_model``, the trainer's recipe, the papers' losses and the pre-training check are all
read from here.

Adding a type is adding one module to ``es_plugin_bridge/models/types/``: its hyper-parameter class,
its recipes and its entry, registered with :func:`register_types`, whose ``order`` places the module's
types in ``ALL_TYPES`` (``--model-type``'s choices), as a mode's ``order`` places it in ``--help``
(``order=25`` comes between Lei et al.'s 20 and paper 004's 30). The package's modules are found on the
first lookup. A new network adds its encoder module too: the encoder imports torch, so it stays out of
the type's module.

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
    #: (``benchmarks/fusion_fit.json``, docs/results.md, "Fusion weights on unseen data").
    fusion_fit: str = "held-out"
    #: Its place in ``ALL_TYPES`` (``--model-type``'s choices); set by :func:`register_types`.
    order: int = 0

    @property
    def recipe(self) -> Recipe:
        """The default recipe: the best measured one."""
        return self.best_recipe or self.paper_recipe

    def recipe_named(self, name: str) -> Recipe:
        if name not in RECIPE_NAMES:
            raise UserError(f"unknown recipe {name!r}; choose one of {', '.join(RECIPE_NAMES)}")
        return self.recipe if name == "best" else self.paper_recipe


def measured_best(paper: Recipe, **changes: Any) -> Recipe:
    """The measured default of a paper type: the paper's loss, word2vec on the training text, a
    10-minute budget checked every 640 examples with patience 5 (docs/training.md, "Default recipes")."""
    return replace(paper, **{"word2vec": True, "epochs": 1000, "time_budget": 600.0, "patience": 5,
                             "examples_per_epoch": 640, **changes})


#: Every model type by name, registered by the modules of ``models.types`` (found on the first lookup).
REGISTRY: Registry[ModelType] = Registry("model type", "es_plugin_bridge.models.types")


def register_types(*entries: ModelType, order: int) -> None:
    """Register a type module's entries (each module of ``models.types`` ends with it): they take the
    places ``order``, ``order + 1``, ... in ``ALL_TYPES``."""
    for i, entry in enumerate(entries):
        REGISTRY.add(entry.name, replace(entry, order=order + i))


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


# Last: listing the registry imports the modules of ``models.types``, which import the names above from
# this module while it is still loading (``models.types`` imports this module first, for the same order
# whichever module is imported first).
#: Every type ``esrerank train`` takes.
ALL_TYPES = tuple(name for name, _ in sorted(REGISTRY.items(), key=lambda item: (item[1].order, item[0])))
#: The papers' seven types (the vocabulary family, which :func:`~es_plugin_bridge.models.build_model`
#: builds over word vectors); ALL_TYPES adds the pretrained sub-word types (transformer, cross-encoder).
PAPER_TYPES = tuple(name for name in ALL_TYPES if REGISTRY[name].family == "vocabulary")
PRETRAINABLE_TYPES = tuple(name for name in ALL_TYPES if REGISTRY[name].pretrainable)

__all__ = ["ALL_TYPES", "LOSS_NAMES", "PAPER_TYPES", "OPTIMIZERS", "PRETRAINABLE_TYPES", "RECIPE_NAMES",
           "REGISTRY", "ModelType", "Recipe", "encoder_class", "encoder_kwargs", "hyper_class",
           "hyper_defaults", "measured_best", "model_type", "parse_hyper", "register_types"]
