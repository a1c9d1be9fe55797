"""The cross-encoder: a BERT-style pair classifier reading (query, candidate) together (the ``pair``
family). Its hyper-parameters are the pair's input cap and pooling; the network's sizes come with its
weights."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from es_plugin_bridge.models.registry import ModelType, Recipe, register_types


class CrossEncoderHyper(BaseModel):
    """A BERT-style pair classifier: ``[CLS] query [SEP] candidate [SEP]`` → one logit.

    ``max_length`` caps the pair (both sides cut longest-first): every candidate of a request runs
    through the network with its query, so this cap is what a reranked window costs. ``pooling``:
    ``cls``, BERT's pooler (tanh of a dense layer over the [CLS] vector, as BertForSequenceClassification
    reads it), or ``mean`` over the pair's tokens (what the packaged MiniLM was trained to pool).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_length: int = Field(128, ge=8, le=512)  # sub-words of the pair, [CLS] and both [SEP] included
    pooling: Literal["cls", "mean"] = "cls"


# A cross-encoder runs every (query, candidate) pair through the network, so a step of B positives with K
# sampled negatives costs B·(1 + K) pair passes: the papers' ranking loss (max-margin, δ = 1 on the pair
# logits, hardest of K) with few negatives, AdamW with the transformer's rate and warm-up.
_RECIPE = Recipe("max-margin", "adamw", 2e-5, clip=1.0, negatives=4, batch_size=16, warmup=50,
                 examples_per_epoch=1600, epochs=1000, time_budget=900.0, patience=3)

register_types(
    ModelType("cross-encoder", "BERT-style pair classifier (all-MiniLM-L6-v2's network by default)",
              CrossEncoderHyper, _RECIPE, "es_plugin_bridge.models.cross_encoder:CrossEncoderModel",
              family="pair", fusion_fit="epoch-data"),
    order=50,
)
