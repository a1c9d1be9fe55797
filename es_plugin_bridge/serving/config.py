"""config.json of an exported model directory: everything needed to score, validated by pydantic.

The exporter builds this model and dumps it; the server parses it back, so both sides agree on
one schema and a hand-edited or truncated file fails with the field named.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from es_plugin_bridge.errors import UserError

FORMAT = "es_plugin_bridge.model_dir"
FORMAT_VERSION = 1
FUSION_KEYS = frozenset({"first_stage", "bow", "neural"})


class Beta(BaseModel):
    """The model's own β (bow-cnn: score = β₁·bow + β₂·neural) and the fusion β per first stage."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: tuple[float, float] | None = None
    fusion: dict[str, dict[str, float]] = Field(default_factory=dict)
    fusion_default: str | None = None
    #: Platt (a, b) per score: ``"model"`` and each first stage's fused score; P = σ(a·score + b).
    calibration: dict[str, tuple[float, float]] = Field(default_factory=dict)

    @field_validator("calibration")
    @classmethod
    def _increasing(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for name, (a, _) in value.items():
            if not a > 0:
                raise ValueError(f"calibration of {name!r} must increase with the score (a > 0)")
        return value

    @field_validator("fusion")
    @classmethod
    def _fusion_keys(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for stage, weights in value.items():
            if set(weights) != FUSION_KEYS:
                raise ValueError(f"fusion weights of {stage!r} need exactly {sorted(FUSION_KEYS)}")
        return value


class Verification(BaseModel):
    """What the exporter checked before publishing the directory."""

    model_config = ConfigDict(extra="allow")

    questions: int
    tolerance: float
    max_abs_diff: float
    score_max_abs_diff: float | None = None


class ExportedConfig(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    format: Literal["es_plugin_bridge.model_dir"]
    format_version: Literal[1]
    model_type: str
    similarity: Literal["cosine", "manhattan"]
    dimension: int = Field(ge=1)
    vocab_size: int = Field(ge=2)
    max_title: int = Field(ge=1)
    max_body: int = Field(ge=1)
    dynamic_length: bool
    inputs: tuple[str, str, str, str] = ("title_ids", "title_mask", "body_ids", "body_mask")
    output: str = "neural"
    opset: int
    text: dict[str, Any]
    beta: Beta
    bow_weights: Literal["learned", "idf"]
    versions: dict[str, str]
    verification: Verification | None = None
    model: dict[str, Any] = Field(default_factory=dict)
    source: dict[str, Any] = Field(default_factory=dict)


def parse_config(data: object, source: str) -> ExportedConfig:
    """Validate a parsed config.json; UserError naming the first bad field."""
    if isinstance(data, dict) and data.get("format") != FORMAT:
        found = data.get("format")
        raise UserError(f"{source}: not an exported model config (format {found!r}, expected {FORMAT!r})")
    try:
        return ExportedConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(root)"
        raise UserError(f"{source}: field {field}: {err['msg']}") from None
