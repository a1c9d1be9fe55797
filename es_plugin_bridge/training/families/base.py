"""The model-family plug-in: everything that differs between families of model types, in one object.

A family (the papers' encoders over the product's vocabulary; a sub-word transformer; next a
cross-encoder) owns how its models are built from the training options, the featurizer that feeds
them, the extra files a checkpoint and an exported directory hold, and its ONNX wrapper with the
batches that verify it. The trainer, the checkpoint and the exporter call these methods and never
branch on a family or a type name. The serving side of a family is its torch-free input adapter
(``serving.inputs``), chosen from the exported graph's input names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.training.featurize import Featurizer


@dataclass(frozen=True)
class BuildSetup:
    """What a family builds a new model from: the training options, vocabulary and text pipeline.

    ``options`` is the trainer's ``TrainConfig`` (``model_type``, ``hyper``, ``init``, ``embeddings``,
    ``embedding_dim``, ``seed``, ``max_title``, ``max_body``); ``word2vec``: the recipe starts word
    vectors from skip-gram on the training text; ``sentences``: that text as tokens, computed on demand.
    """

    options: Any
    vocab: Vocabulary
    preprocessor: Preprocessor
    word2vec: bool
    sentences: Callable[[], list[list[str]]]


@dataclass(frozen=True)
class Built:
    """A new model, its featurizer and where its word vectors came from (``embeddings`` of the summary)."""

    model: Any
    featurizer: Featurizer
    embeddings_info: dict[str, Any]


@dataclass
class Probe:
    """One verification batch of the exported graph: its name, the questions, whether to pad to the caps."""

    name: str
    questions: list[Question]
    fixed: bool


class ModelFamily(ABC):
    """One family of model types (see the module docstring); registered in ``training.families``."""

    #: The name model types give as their ``family`` in ``models.registry``.
    name: ClassVar[str]
    #: The exported encoder graph's input names (``core.model_config``): serving picks its adapter by them.
    inputs: ClassVar[tuple[str, ...]]
    #: Whether a new model is already trained (a pretrained network): it then competes, as initialised,
    #: with every fine-tuned epoch on dev.
    starts_pretrained: ClassVar[bool] = False
    #: The graph lengths to try, in order: True = dynamic sequence lengths, False = padded to the caps.
    length_modes: ClassVar[tuple[bool, ...]] = (True,)
    #: How an int8 graph is judged against torch (``exporters.onnx_graph.distance``): ``cosine`` of
    #: vectors (what they are used for), ``abs`` of a graph whose output is a score.
    quantized_measure: ClassVar[str] = "cosine"

    # -- training and checkpoints ---------------------------------------------------------------------
    @abstractmethod
    def build(self, setup: BuildSetup) -> Built:
        """A new model for ``setup.options.model_type``; UserError for an option the family does not take."""

    @abstractmethod
    def rebuild(self, directory: Path, model_config: dict[str, Any]) -> Any:
        """The architecture of a checkpoint (weights are loaded by the caller)."""

    @abstractmethod
    def featurizer(self, model: Any, preprocessor: Preprocessor, vocab: Vocabulary, max_title: int,
                   max_body: int) -> Featurizer:
        """The featurizer whose ``batch`` the model's ``encode`` takes."""

    def save_files(self, model: Any, out: Path) -> None:  # noqa: B027 - most families have none
        """Extra checkpoint files beside the weights, vocabulary and config."""

    # -- export -----------------------------------------------------------------------------------
    @abstractmethod
    def onnx_module(self, model: Any) -> torch.nn.Module:
        """The encoder as a module of flat tensors (``inputs``, in order) → the question vector."""

    @abstractmethod
    def trace_batch(self, featurizer: Featurizer, questions: list[Question]) -> dict[str, torch.Tensor]:
        """The real batch the graph is traced on."""

    @abstractmethod
    def dynamic_axes(self, dynamic: bool) -> dict[str, dict[int, str]]:
        """The graph's dynamic axes per input (the batch axis always; lengths when ``dynamic``)."""

    @abstractmethod
    def probes(self, questions: list[Question]) -> list[Probe]:
        """The batches a dynamic-length graph must match torch on; the first is the recorded comparison."""

    def probe_feed(self, featurizer: Featurizer, probe: Probe) -> dict[str, torch.Tensor]:
        """The graph's feed for a probe (the featurizer's batch at its own widths by default)."""
        return featurizer.batch(probe.questions)

    @torch.no_grad()
    def torch_output(self, model: Any, featurizer: Featurizer, probe: Probe) -> np.ndarray:
        """What the graph must reproduce on a probe: torch's output as the scorer computes it (the
        question vectors, each batch at its own natural widths, by default)."""
        return model.encode(**featurizer.batch(probe.questions))["neural"].numpy()

    def export_files(self, model: Any, out: Path) -> None:  # noqa: B027 - most families have none
        """Extra files of the exported directory (covered by its manifest)."""

    def exported_config(self, model: Any) -> dict[str, Any]:
        """The family's fields of the exported config.json: ``inputs``, ``tokenizer``, extra ``versions``."""
        return {"inputs": self.inputs, "tokenizer": None, "versions": {}}


def fixed(checks: Sequence[Probe]) -> list[Probe]:
    """The same probes padded to the caps (what a fixed-length graph is fed)."""
    return [Probe(p.name, p.questions, True) for p in checks]


__all__ = ["BuildSetup", "Built", "ModelFamily", "Probe", "fixed"]
