"""config.json of an exported model directory: everything needed to score, validated by pydantic.

Part of the model-directory format the scoring core defines: the exporter builds this model and dumps
it, the server parses it back, so both sides agree on one schema and a hand-edited or truncated file
fails with the field named. Values are bounded beyond their types (lengths, sizes, β, Platt curves).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from es_plugin_bridge.core.hybrid_fusion import HybridFusion
from es_plugin_bridge.errors import UserError

FORMAT = "es_plugin_bridge.model_dir"
FORMAT_VERSION = 1
FUSION_KEYS = frozenset({"first_stage", "bow", "neural"})
#: Bounds a config.json is held to beyond its types: a file that passes them cannot make the server
#: allocate without bound (lengths, sizes), nor answer NaN or saturated scores (β, Platt curves).
MAX_WEIGHT = 1e3
MAX_PLATT = 1e6
MAX_LENGTH = 4096
MAX_DIMENSION = 65536
MAX_VOCAB = 10_000_000
#: The encoder graph's input names, per family: the papers' encoders read vocabulary ids of the title
#: and the body, a transformer the sub-word ids of its own tokenizer, a cross-encoder the sub-word ids
#: of a (query, candidate) pair read together, with segment ids. Serving picks the input adapter from
#: these names (``serving.inputs``), so a directory never names code.
VOCABULARY_INPUTS = ("title_ids", "title_mask", "body_ids", "body_mask")
SUBWORD_INPUTS = ("input_ids", "attention_mask")
PAIR_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: The encoder graph's one output: the question's vector (a pair graph: the pair's logit, [B, 1]).
ENCODER_OUTPUT = "neural"


def _bounded(name: str, value: float, limit: float) -> None:
    if not abs(value) <= limit:  # also refuses NaN
        raise ValueError(f"{name} must be a finite number within ±{limit:g}, got {value!r}")


class Beta(BaseModel):
    """The model's own β (bow-cnn: score = β₁·bow + β₂·neural) and the fusion β per first stage."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    model: tuple[float, float] | None = None
    fusion: dict[str, dict[str, float]] = Field(default_factory=dict)
    fusion_default: str | None = None
    #: Platt (a, b) per score: ``"model"`` and each first stage's fused score; P = σ(a·score + b).
    calibration: dict[str, tuple[float, float]] = Field(default_factory=dict)

    @field_validator("calibration")
    @classmethod
    def _increasing(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for name, (a, b) in value.items():
            if not a > 0:
                raise ValueError(f"calibration of {name!r} must increase with the score (a > 0)")
            _bounded(f"calibration of {name!r}", a, MAX_PLATT)
            _bounded(f"calibration of {name!r}", b, MAX_PLATT)
        return value

    @field_validator("model")
    @classmethod
    def _model_bounded(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        for w in value or ():
            _bounded("model β", w, MAX_WEIGHT)
        return value

    @model_validator(mode="after")
    def _default_known(self) -> Beta:
        if self.fusion_default is not None and self.fusion_default not in self.fusion:
            raise ValueError(f"fusion_default {self.fusion_default!r} has no fusion weights "
                             f"(the model has {sorted(self.fusion)})")
        return self

    @field_validator("fusion")
    @classmethod
    def _fusion_keys(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for stage, weights in value.items():
            if set(weights) != FUSION_KEYS:
                raise ValueError(f"fusion weights of {stage!r} need exactly {sorted(FUSION_KEYS)}")
            for key, w in weights.items():
                _bounded(f"fusion weight {stage}.{key}", w, MAX_WEIGHT)
            if weights["first_stage"] < 0:  # Elasticsearch's linear retriever takes weights >= 0
                raise ValueError(f"fusion weight {stage}.first_stage must be >= 0")
        return value


#: How the server runs the encoder so that a text's output depends on that text alone
#: (``serving.encode_schedule``; measured by ``exporters.batch_check``).
EncodeSchedule = Literal["per-text", "batched", "length-buckets"]


class Verification(BaseModel):
    """What the exporter checked before publishing the directory."""

    model_config = ConfigDict(extra="allow")

    questions: int
    tolerance: float
    #: The largest difference found, in ``measure``: ``abs`` = max |onnxruntime − torch| of the vector
    #: components (fp32 export); ``cosine`` = max 1 − cos(onnxruntime vector, torch vector) (int8).
    max_abs_diff: float
    measure: Literal["abs", "cosine"] = "abs"
    score_max_abs_diff: float | None = None
    #: The schedule the export proved batch-independent; absent in exports from before the measurement.
    encode: EncodeSchedule | None = None
    #: ``length-buckets``: sub-words from which a text runs alone.
    alone_from: int | None = Field(default=None, ge=2)
    #: The largest |Δ| of a row between alone and inside runs with other texts, before any schedule.
    batch_max_abs_diff: float | None = None


class SubwordConfig(BaseModel):
    """A transformer's sub-word tokenizer (``tokenizer.json``, read by ``serving.tokenizer``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Literal["tokenizer.json"] = "tokenizer.json"
    max_length: int = Field(ge=2, le=MAX_LENGTH)
    #: What the tokenizer reads: the preprocessed title and cut body tokens joined by spaces.
    text: Literal["tokens"] = "tokens"


class ExportedConfig(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    format: Literal["es_plugin_bridge.model_dir"]
    format_version: Literal[1]
    model_type: str
    #: How ``neural`` is computed from the graph's output: cosine or exp(−L1) of two questions' vectors,
    #: or (``sigmoid``, a pair graph) σ of the pair's logit (``core.scoring``).
    similarity: Literal["cosine", "manhattan", "sigmoid"]
    dimension: int = Field(ge=1, le=MAX_DIMENSION)
    vocab_size: int = Field(ge=2, le=MAX_VOCAB)
    max_title: int = Field(ge=1, le=MAX_LENGTH)
    max_body: int = Field(ge=1, le=MAX_LENGTH)
    dynamic_length: bool
    #: The papers' graphs take (title_ids, title_mask, body_ids, body_mask); a transformer's
    #: (input_ids, attention_mask) from its ``tokenizer``; a cross-encoder's also token_type_ids.
    inputs: tuple[str, ...] = Field(VOCABULARY_INPUTS, min_length=2, max_length=4)
    output: str = ENCODER_OUTPUT
    opset: int
    text: dict[str, Any]
    beta: Beta
    bow_weights: Literal["learned", "idf"]
    versions: dict[str, str]
    verification: Verification | None = None
    tokenizer: SubwordConfig | None = None
    #: The learned hybrid (``core.hybrid_fusion``), fitted on dev at training time; None for a model
    #: without vectors (a cross-encoder) or one exported before the fit existed.
    hybrid: HybridFusion | None = None
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
