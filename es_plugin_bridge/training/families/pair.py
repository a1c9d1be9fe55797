"""The pair family: a cross-encoder (``models.cross_encoder``) reading (query, candidate) pairs together.

Built from ``--init DIR`` or the packaged all-MiniLM-L6-v2 with a fresh head; fed each question's own
sub-word ids without special tokens (:class:`PairFeaturizer`), which the model pairs itself; a
checkpoint holds the network's config and ``tokenizer.json`` as the sub-word family's does. The
exported graph takes the pair rows (``core.model_config.PAIR_INPUTS``: input_ids, attention_mask,
token_type_ids; dynamic batch and length) and gives one logit per pair; it is verified against torch on
pairs of real questions, and the sidecar's ``serving.inputs.pair`` builds the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from es_plugin_bridge.core.model_config import PAIR_INPUTS
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.inputs.pair import PairLayout
from es_plugin_bridge.serving.tokenizer import TOKENIZER, SubwordTokenizer
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.training.families import register_family
from es_plugin_bridge.training.families.base import BuildSetup, Built, Probe
from es_plugin_bridge.training.families.subword import SubwordFamily, SubwordFeaturizer
from es_plugin_bridge.training.featurize import Featurizer


class PairFeaturizer(SubwordFeaturizer):
    """``batch``: each question's own sub-word ids (its side of a pair, no special tokens);
    ``pair_batch``: the pair rows of (query, candidate) questions, as the sidecar builds them."""

    special_tokens = False

    def __init__(self, preprocessor: Preprocessor, vocab: Vocabulary, tokenizer: SubwordTokenizer,
                 max_title: int = 48, max_body: int = 100) -> None:
        super().__init__(preprocessor, vocab, tokenizer, max_title, max_body)
        self.layout = PairLayout.of(tokenizer, TOKENIZER)

    def pair_batch(self, pairs: Sequence[tuple[Question, Question]]) -> dict[str, torch.Tensor]:
        sides = self.subword_ids([q for pair in pairs for q in pair])
        batch = self.layout.batch(list(zip(sides[0::2], sides[1::2], strict=True)))
        return {name: torch.from_numpy(batch[name]) for name in PAIR_INPUTS}


class _PairGraph(torch.nn.Module):
    """The cross-encoder on flat pair rows → its logit [B, 1] (the graph's ``neural`` output)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN201
        return self.model(input_ids, attention_mask, token_type_ids).unsqueeze(-1)


def _pairs(questions: Sequence[Question]) -> list[tuple[Question, Question]]:
    """Each question with the next (the last with the first): real pairs of varied lengths."""
    if len(questions) < 2:
        return [(q, q) for q in questions]
    return list(zip(questions, [*questions[1:], questions[0]], strict=True))


class PairFamily(SubwordFamily):
    """The sub-word family's files and tokenizer, with pair inputs, a pair graph and pair probes."""

    name = "pair"
    inputs = PAIR_INPUTS
    #: The head is new: the model as initialised ranks at random, so it does not compete on dev.
    starts_pretrained = False
    #: The graph's output is a logit, not a vector: an int8 graph is held to max |Δ logit|.
    quantized_measure = "abs"

    def build(self, setup: BuildSetup) -> Built:
        from es_plugin_bridge.models.cross_encoder import build_cross_encoder

        cfg = setup.options
        if cfg.embeddings:
            raise UserError("--embeddings do not apply to the cross-encoder type (it has its own)")
        if cfg.loss == "in-batch":
            raise UserError("the in-batch loss compares question vectors; a cross-encoder has none: train "
                            "it with a ranking loss (--loss max-margin, logistic) over sampled negatives "
                            "(--negatives, of which --hard-negatives N are mined by BM25)")
        model = build_cross_encoder(cfg.init, **cfg.hyper)
        featurizer = self.featurizer(model, setup.preprocessor, setup.vocab, cfg.max_title, cfg.max_body)
        return Built(model, featurizer, {})

    def rebuild(self, directory: Path, model_config: dict[str, Any]) -> Any:
        from es_plugin_bridge.models.cross_encoder import cross_encoder_from_checkpoint

        return cross_encoder_from_checkpoint(directory, model_config)

    def featurizer(self, model: Any, preprocessor: Preprocessor, vocab: Vocabulary, max_title: int,
                   max_body: int) -> Featurizer:
        return PairFeaturizer(preprocessor, vocab, model.tokenizer, max_title, max_body)

    def onnx_module(self, model: Any) -> torch.nn.Module:
        return _PairGraph(model)

    def trace_batch(self, featurizer: Featurizer, questions: list[Question]) -> dict[str, torch.Tensor]:
        assert isinstance(featurizer, PairFeaturizer)
        return featurizer.pair_batch(_pairs(questions[:8]))

    def probes(self, questions: list[Question]) -> list[Probe]:
        """Pairs of natural widths: every question with the next, titles only, one pair."""
        titles = [Question(f"{q.id}#title-only", q.title, "") for q in questions[:16]]
        return [Probe("natural", questions, False), Probe("titles", titles, False),
                Probe("single", questions[:2], False)]

    def probe_feed(self, featurizer: Featurizer, probe: Probe) -> dict[str, torch.Tensor]:
        assert isinstance(featurizer, PairFeaturizer)
        return featurizer.pair_batch(_pairs(probe.questions))

    @torch.no_grad()
    def torch_output(self, model: Any, featurizer: Featurizer, probe: Probe) -> np.ndarray:
        """The model's logits [N, 1] of the probe's pairs (the scorer's ``_pair_logits``)."""
        return model(**self.probe_feed(featurizer, probe)).unsqueeze(-1).numpy()


register_family(PairFamily())

__all__ = ["PairFamily", "PairFeaturizer"]
