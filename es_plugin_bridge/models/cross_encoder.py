"""The ``cross-encoder`` model type: a BERT-style pair classifier that reads query and candidate together.

Where the bi-encoder (``models.transformer``) encodes each question alone and compares vectors, this
reads ``[CLS] query [SEP] candidate [SEP]`` (segment ids 0, then 1) through one pretrained network —
by default the packaged all-MiniLM-L6-v2, or any local BERT-style directory with ``--init DIR`` — and a
linear head, initialised fresh, turns the pooled vector (``cls``: BERT's pooler; ``mean``) into one
logit. Every token of the query attends to every token of the candidate, which is why a cross-encoder
ranks better than vectors compared afterwards, and why it cannot index anything: each (query,
candidate) pair runs through the network, so it reranks a first stage's window.

It keeps the papers' interface so the trainer's ranking losses need no branch: ``encode`` returns each
question's own sub-word ids (``input_ids`` / ``attention_mask`` rows, no special tokens: the trainer
indexes their rows like vectors), and ``score`` / ``score_candidates`` build the pairs
(``serving.inputs.pair.PairLayout``, the function the sidecar uses) and run the network on them. Both
return the logit, what the losses compare; the scorers report σ(logit) as ``neural`` (``core.scoring``).
Nothing is downloaded and only safetensors weights are read, as for the transformer type.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.registry import parse_hyper
from es_plugin_bridge.models.transformer import (
    NETWORK_CONFIG,
    check_init,
    default_init,
    load_network_state,
    network_from_config,
)
from es_plugin_bridge.models.types.cross_encoder import CrossEncoderHyper
from es_plugin_bridge.serving.inputs.pair import PairLayout
from es_plugin_bridge.serving.tokenizer import TOKENIZER, SubwordTokenizer

#: The names of the pair graph's inputs, in the order ``forward`` takes them.
PAIR_FEED = ("input_ids", "attention_mask", "token_type_ids")


class CrossEncoderModel(nn.Module):
    """Pretrained network + linear head over (query, candidate) pairs, behind the papers' interface."""

    model_type = "cross-encoder"
    bow = None
    beta = None
    #: Query and candidate are read together: no vector per question (``serving.scorer``).
    pairwise = True
    #: ``neural`` = σ(pair logit) (``core.scoring.pair_similarity``).
    similarity = "sigmoid"
    #: The graph's output per pair: one logit.
    output_dim = 1

    def __init__(self, hyper: CrossEncoderHyper, network: nn.Module, tokenizer: SubwordTokenizer) -> None:
        super().__init__()
        self.hyper = hyper
        self.network = network
        config = network.config
        self.dropout = nn.Dropout(float(getattr(config, "hidden_dropout_prob", 0.1)))
        self.head = nn.Linear(int(config.hidden_size), 1)
        nn.init.normal_(self.head.weight, std=float(getattr(config, "initializer_range", 0.02)))
        nn.init.zeros_(self.head.bias)
        self.tokenizer = tokenizer
        self.layout = PairLayout.of(tokenizer, TOKENIZER)

    @property
    def network_config(self) -> dict[str, Any]:
        return self.network.config.to_dict()

    def config(self) -> dict[str, Any]:
        """JSON-ready arguments stored in the checkpoint (the network's sizes are in its own file)."""
        return {"model_type": self.model_type, **self.hyper.model_dump(mode="json")}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> torch.Tensor:
        """Logits [B] of pair rows (``PairLayout.batch``)."""
        out = self.network(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        if self.hyper.pooling == "cls":
            pooled = out.pooler_output
        else:
            weights = attention_mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
            pooled = (out.last_hidden_state * weights).sum(1) / weights.sum(1).clamp_min(1e-9)
        return self.head(self.dropout(pooled)).squeeze(-1)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each question's own sub-word rows, unchanged: a cross-encoder encodes nothing alone."""
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def pair_batch(self, a: Mapping[str, torch.Tensor],
                   b: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The pair rows of query rows ``a`` [N, T] and candidate rows ``b`` [N, T']."""
        def sides(rows: Mapping[str, torch.Tensor]) -> list[list[int]]:
            return [ids[mask.bool()].tolist() for ids, mask in zip(rows["input_ids"], rows["attention_mask"],
                                                                   strict=True)]

        batch = self.layout.batch(list(zip(sides(a), sides(b), strict=True)))
        device = self.head.weight.device
        return {name: torch.from_numpy(batch[name]).to(device) for name in PAIR_FEED}

    def score(self, a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits [N] of the pairs (a[i], b[i])."""
        if a["input_ids"].shape[0] == 0:
            return torch.zeros(0, device=self.head.weight.device)
        return self(**self.pair_batch(a, b))

    def score_candidates(
        self, a: Mapping[str, torch.Tensor], candidates: Mapping[str, torch.Tensor]
    ) -> torch.Tensor:
        """Logits of B queries against B·K candidates (query i's K contiguous) → [B, K]."""
        queries, total = a["input_ids"].shape[0], candidates["input_ids"].shape[0]
        if queries == 0 or total % queries:
            raise ValueError(f"{total} candidates do not split evenly over {queries} queries")
        k = total // queries
        repeated = {name: value.repeat_interleave(k, dim=0) for name, value in a.items()}
        return self.score(repeated, candidates).reshape(queries, k)


def _network_and_tokenizer(config: Mapping[str, Any], tokenizer: Path, max_length: int,
                           ) -> tuple[nn.Module, SubwordTokenizer]:
    network = network_from_config(config)
    if not hasattr(network.config, "type_vocab_size") or int(network.config.type_vocab_size) < 2:
        raise UserError(f"{tokenizer.parent}: the network has no segment (token type) embeddings for a "
                        "second text; a cross-encoder needs a BERT-style network (type_vocab_size >= 2)")
    return network, SubwordTokenizer.from_file(str(tokenizer), max_length)


def build_cross_encoder(init: str | Path | None = None, **hyper: Any) -> CrossEncoderModel:
    """The network of ``init`` (default: the packaged MiniLM) with a fresh head, ready to fine-tune."""
    from safetensors.torch import load_file

    parsed = parse_hyper("cross-encoder", hyper)
    assert isinstance(parsed, CrossEncoderHyper)
    directory = check_init(Path(init)) if init is not None else default_init()
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    network, tokenizer = _network_and_tokenizer(config, directory / TOKENIZER, parsed.max_length)
    weights = directory / "model.safetensors"
    load_network_state(network, load_file(str(weights)), weights)
    return CrossEncoderModel(parsed, network, tokenizer)


def cross_encoder_from_checkpoint(directory: Path, model_config: Mapping[str, Any]) -> CrossEncoderModel:
    """The architecture of a cross-encoder checkpoint (weights are loaded by the caller)."""
    directory = Path(directory)
    parsed = parse_hyper("cross-encoder", {k: v for k, v in model_config.items() if k != "model_type"})
    assert isinstance(parsed, CrossEncoderHyper)
    path = directory / NETWORK_CONFIG
    if not path.is_file():
        raise UserError(f"{directory}: {NETWORK_CONFIG} is missing (not a cross-encoder checkpoint)")
    config = json.loads(path.read_text(encoding="utf-8"))
    network, tokenizer = _network_and_tokenizer(config, directory / TOKENIZER, parsed.max_length)
    return CrossEncoderModel(parsed, network, tokenizer)


__all__ = ["PAIR_FEED", "CrossEncoderModel", "build_cross_encoder", "cross_encoder_from_checkpoint"]
