"""The transformer: a pretrained sentence-transformers bi-encoder (the ``subword`` family). Its
hyper-parameters are the input cap and pooling; the network's own sizes come with its weights."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from es_plugin_bridge.models.registry import ModelType, Recipe, register_types


class TransformerHyper(BaseModel):
    """A sentence-transformers bi-encoder: title and cut body as one text, mean pooling, unit vectors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_length: int = Field(128, ge=8, le=512)  # sub-word tokens, [CLS] and [SEP] included
    pooling: Literal["mean"] = "mean"
    similarity: Literal["cosine"] = "cosine"
    text_combine: Literal["concat"] = "concat"
    symmetric: bool = True  # in-batch loss in both directions (q1 → q2 and q2 → q1; measured default)


# In-batch negatives (MultipleNegativesRankingLoss), AdamW with a short warm-up; the dev score of the
# pretrained model (epoch 0) competes with every fine-tuned epoch.
# Measured on the demo's AskUbuntu split (docs/training.md, "The transformer type"): lr 2e-5 with the
# symmetric loss raised dev MAP over the pretrained model where 1e-4 with BM25 hard negatives lowered it.
_RECIPE = Recipe("in-batch", "adamw", 2e-5, clip=1.0, batch_size=32, warmup=50, examples_per_epoch=3200,
                 epochs=1000, time_budget=900.0, patience=3)

register_types(
    ModelType("transformer", "sentence-transformers bi-encoder (all-MiniLM-L6-v2 by default)",
              TransformerHyper, _RECIPE, "es_plugin_bridge.models.transformer:TransformerEncoder",
              family="subword"),
    order=40,
)
