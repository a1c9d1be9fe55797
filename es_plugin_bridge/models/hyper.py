"""Hyper-parameters of each model type, with the papers' defaults, validated by pydantic.

Defaults: BOW-CNN and CNN from dos Santos et al. Table 2 (window 3; 400 and 1000 conv units);
RCNN, LSTM, GRU from Lei et al. Table 3 (hidden 400 / 240 / 280, n = 2) with their best
pooling (Table 2) and title/body averaging; Siamese LSTM / CNN from paper 004 Sections 5.3–5.4
(LSTM 50, 32 filters of width 3, dropout 0.5, Manhattan similarity). Bogdanova's CNN is
``cnn`` with ``pooling="sum", conv_units=300``. The transformer's and the cross-encoder's are their
input cap and pooling (the pretrained network's own sizes come with its weights). Which class belongs
to which type is said once, in ``models.registry``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Common(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    freeze_embeddings: bool = False
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    text_combine: Literal["concat", "average"] = "concat"
    similarity: Literal["cosine", "manhattan"] = "cosine"


class CNNHyper(_Common):
    window: int = Field(3, ge=1, le=15)
    conv_units: int = Field(1000, ge=1)
    pooling: Literal["max", "sum"] = "max"


class BowCNNHyper(CNNHyper):
    conv_units: int = Field(400, ge=1)
    bow_init: Literal["idf", "ones"] = "idf"
    bow_trainable: bool = True
    beta_init: tuple[float, float] = (1.0, 1.0)


class RCNNHyper(_Common):
    hidden_dim: int = Field(400, ge=1)
    order: int = Field(2, ge=1, le=5)
    pooling: Literal["last", "mean"] = "last"
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    text_combine: Literal["concat", "average"] = "average"


class LSTMHyper(_Common):
    hidden_dim: int = Field(240, ge=1)
    pooling: Literal["last", "mean"] = "mean"
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    text_combine: Literal["concat", "average"] = "average"


class GRUHyper(LSTMHyper):
    hidden_dim: int = Field(280, ge=1)


class SiameseLSTMHyper(_Common):
    hidden_dim: int = Field(50, ge=1)
    attention_dim: int = Field(50, ge=1)
    similarity: Literal["cosine", "manhattan"] = "manhattan"


class SiameseCNNHyper(_Common):
    num_filters: int = Field(32, ge=1)
    kernel_sizes: tuple[int, ...] = Field((3,), min_length=1)
    dense_dim: int = Field(50, ge=1)
    dropout: float = Field(0.5, ge=0.0, lt=1.0)
    similarity: Literal["cosine", "manhattan"] = "manhattan"


class TransformerHyper(BaseModel):
    """A sentence-transformers bi-encoder: title and cut body as one text, mean pooling, unit vectors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_length: int = Field(128, ge=8, le=512)  # sub-word tokens, [CLS] and [SEP] included
    pooling: Literal["mean"] = "mean"
    similarity: Literal["cosine"] = "cosine"
    text_combine: Literal["concat"] = "concat"
    symmetric: bool = True  # in-batch loss in both directions (q1 → q2 and q2 → q1; measured default)


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
