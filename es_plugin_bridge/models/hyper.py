"""Hyper-parameters of each model type, with the papers' defaults, validated by pydantic.

Defaults: BOW-CNN and CNN from dos Santos et al. Table 2 (window 3; 400 and 1000 conv units);
RCNN, LSTM, GRU from Lei et al. Table 3 (hidden 400 / 240 / 280, n = 2) with their best
pooling (Table 2) and title/body averaging; Siamese LSTM / CNN from paper 004 Sections 5.3–5.4
(LSTM 50, 32 filters of width 3, dropout 0.5, Manhattan similarity). Bogdanova's CNN is
``cnn`` with ``pooling="sum", conv_units=300``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from es_plugin_bridge.errors import UserError

PRETRAINABLE_TYPES = ("rcnn", "lstm", "gru")


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


HYPER_CLASSES: dict[str, type[_Common]] = {
    "bow-cnn": BowCNNHyper,
    "cnn": CNNHyper,
    "rcnn": RCNNHyper,
    "lstm": LSTMHyper,
    "gru": GRUHyper,
    "siamese-lstm": SiameseLSTMHyper,
    "siamese-cnn": SiameseCNNHyper,
}


def check_model_type(model_type: str) -> None:
    """UserError for a name outside MODEL_TYPES."""
    if model_type not in HYPER_CLASSES:
        raise UserError(f"unknown model type {model_type!r}; choose one of {', '.join(HYPER_CLASSES)}")


def parse_hyper(model_type: str, hyper: dict[str, Any]) -> _Common:
    """Validated hyper-parameters for ``model_type``; UserError naming the bad or unknown parameter."""
    check_model_type(model_type)
    cls = HYPER_CLASSES[model_type]
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
    check_model_type(model_type)
    return HYPER_CLASSES[model_type]().model_dump(mode="json")
