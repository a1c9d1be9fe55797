"""Request and response bodies of the sidecar's HTTP API, validated by pydantic.

``/v1/rerank`` follows Cohere's rerank shape (``query``, ``documents``, ``top_n``,
``return_documents`` → ``results[{index, relevance_score}]``), so Elasticsearch's ``custom``
inference service and OpenSearch's rerank connectors can call it unchanged. ``/v2/rerank`` is
Cohere's v2 shape (``cohere.ClientV2``, LangChain's and LlamaIndex's ``CohereRerank``): strings only,
``id`` and ``meta`` in the answer, scored by the same service. Unknown fields are refused (a misspelt
``top_n`` must not be ignored silently), except the Cohere fields a client may send by habit
(``model``, ``rank_fields``, ``max_chunks_per_doc``; v2: ``max_tokens_per_doc``, ``priority``), which
are accepted and unused.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from es_plugin_bridge.data.questions import question_from_text, question_id
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.text.pipeline import Preprocessor
from es_plugin_bridge.text.sidecar_text import MAX_TEXT_CHARS, is_blank, sidecar_refusal, unscored_candidate

#: The validation context's key for the served model's preprocessor (``routes_api._parse`` gives it):
#: with it a text the model reads as no token is refused, or unscored, as a blank one is.
PREPROCESSOR = "preprocessor"
#: A character that is not whitespace as Python's ``str.isspace`` has it: the one rule of "not blank",
#: written so that JSON Schema's ECMA-262 regex means the same (its ``\S`` takes U+0085 and U+001C–U+001F
#: for text, so a text of only those passed the document and failed the server).
_NOT_BLANK_CHAR = (r"[^\t\n\u000b\u000c\r\u001c-\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029"
                   r"\u202f\u205f\u3000]")
#: The document's form of the rule: "some character is not blank", anchored so that it means the same to
#: a generator that reads a bare class beside minLength/maxLength as the whole string (schemathesis'
#: coverage phase turns ``[^…]`` + maxLength 100,000 into ``^[^…]{1,100000}$``, too large for its regex
#: engine: it then built no valid body for /v1/rerank and sent ``0`` as a "valid" one).
NOT_BLANK_PATTERN = r"^[\s\S]*" + _NOT_BLANK_CHAR
#: What the spec says of every text the server requires to be non-blank (the validators enforce it).
NOT_BLANK = {"pattern": NOT_BLANK_PATTERN, "minLength": 1, "maxLength": MAX_TEXT_CHARS}


def _integral(value: Any) -> Any:
    """JSON Schema's ``integer`` holds every number with no fractional part (``80.0`` too); Python's int
    check does not, so such a float becomes its int. A string or a boolean stays refused (strict)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def json_int(minimum: int | None = None) -> Any:
    """An integer as JSON Schema has it (``80`` or ``80.0``, never ``"80"`` or ``true``), at least
    ``minimum``; the bound sits inside the type so that the document says ``minimum``, not pydantic's
    internal ``ge``."""
    return Annotated[int, Field(ge=minimum), Strict(), BeforeValidator(_integral)]


class DocumentIn(BaseModel):
    """A question given as parts; ``id`` is echoed back when documents are returned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = None
    title: str = Field(max_length=MAX_TEXT_CHARS, description="not blank",
                       json_schema_extra={"pattern": NOT_BLANK_PATTERN, "minLength": 1})
    body: str = Field(default="", max_length=MAX_TEXT_CHARS)

    @field_validator("title")
    @classmethod
    def _title_not_blank(cls, value: str) -> str:
        if is_blank(value):
            raise ValueError("title must not be empty")
        return value


def to_question(item: str | DocumentIn) -> Question:
    """A plain string is a title optionally followed by its HTML body (as in the pair files)."""
    if isinstance(item, str):
        return question_from_text(item)
    return Question(item.id or question_id(item.title, item.body), item.title, item.body)


def check_text(value: Any, preprocessor: Preprocessor | None = None) -> Any:
    """``value`` when the sidecar takes it as a query or a text to embed (``text.sidecar_text``), else a
    ValueError saying why; a value of another type is left to its own validation."""
    if isinstance(value, str | DocumentIn):
        reason = sidecar_refusal(value if isinstance(value, str) else to_question(value), preprocessor)
        if reason is not None:
            raise ValueError(reason)
    return value


def checked_text(value: Any, info: ValidationInfo) -> Any:
    """:func:`check_text` with the served model's preprocessor, when the validation context has it."""
    return check_text(value, (info.context or {}).get(PREPROCESSOR))


#: A question: a string (title, optionally followed by its HTML body) or its parts.
Text = Annotated[Annotated[str, WithJsonSchema({"type": "string", **NOT_BLANK})] | DocumentIn,
                 AfterValidator(checked_text)]


class RerankDocumentIn(DocumentIn):
    """A rerank candidate as parts: as :class:`DocumentIn`, but a blank or over-long title or body is
    not refused here; the document gets the lowest score (:func:`unscored_reason`)."""

    title: str = Field(description="blank, or over 100,000 characters: the lowest score")
    body: str = ""

    @field_validator("title")
    @classmethod
    def _title_not_blank(cls, value: str) -> str:  # overrides DocumentIn's: blank is scored lowest
        return value


#: A rerank candidate. An engine needs one score per document, so ``null``, a blank (empty or
#: whitespace-only) or an over-long text is answered with the lowest score, not a 400 for the whole
#: window (issue 14); a value of another JSON type (a number, a list) is still a 400: a client bug.
RerankText = str | RerankDocumentIn | None

#: Why a rerank candidate is not scored (the ``reason`` of /metrics and of ``explain.unscored``).
UNSCORED_REASONS = ("null", "blank", "too_long")


def unscored_reason(item: str | DocumentIn | None, preprocessor: Preprocessor | None = None) -> str | None:
    """Why ``item`` gets the lowest score without being scored, or None when it is scored: ``null``, or
    the one rule of ``text.sidecar_text.unscored_candidate`` (with the served model's ``preprocessor``, a text
    it reads as no token is ``blank`` too); the bridge's client reads the same rule."""
    if item is None:
        return "null"
    return unscored_candidate(item if isinstance(item, str) else to_question(item), preprocessor)


class RerankRequest(BaseModel):
    """``POST /v1/rerank``."""

    model_config = ConfigDict(extra="forbid")

    query: Text
    documents: list[RerankText] = Field(
        min_length=1, description="the candidates: a string (title, optionally followed by its HTML body) "
                                  "or {id, title, body}; one that is null, blank or over 100,000 characters "
                                  "is not scored and gets the lowest score (0.0)")
    # strict: "3" or true where a number belongs is a client bug to report, not to guess at
    top_n: json_int(1) | None = None
    return_documents: Annotated[bool, Strict()] = False
    explain: Annotated[bool, Strict()] = False
    first_stage_scores: list[Annotated[float, Strict()]] | None = None
    first_stage: str | None = Field(
        default=None, min_length=1,
        description="whose β to fuse with (bm25, lmdirichlet, given); default: the model's"
    )
    # Cohere fields clients send by habit; accepted, not used.
    model: str | None = None
    rank_fields: list[str] | None = None
    max_chunks_per_doc: json_int() | None = None

    @field_validator("first_stage_scores")
    @classmethod
    def _finite(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and not all(math.isfinite(x) for x in value):
            raise ValueError("scores must be finite numbers")
        return value


class RerankV2Request(BaseModel):
    """``POST /v2/rerank``: Cohere's v2 request. ``null`` is accepted wherever Cohere's clients send it
    for "not set" (LangChain sends ``"max_tokens_per_doc": null``)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(default=None, description="accepted and unused: the sidecar serves one model")
    query: Annotated[str, WithJsonSchema({"type": "string", **NOT_BLANK}), AfterValidator(checked_text)]
    documents: list[str | None] = Field(
        min_length=1, description="the candidates as strings (a title, optionally followed by its HTML "
                                  "body); one that is null, blank or over 100,000 characters gets the "
                                  "lowest score")
    top_n: json_int(1) | None = None
    max_tokens_per_doc: json_int(1) | None = Field(
        default=None, description="accepted and unused: the model's own token caps apply")
    priority: json_int(0) | None = Field(
        default=None, description="accepted and unused: requests are served in arrival order")

    def as_v1(self) -> RerankRequest:
        """The same request in v1's shape, for the one scoring path (already validated: no second pass)."""
        return RerankRequest.model_construct(query=self.query, documents=self.documents, top_n=self.top_n)


class RerankParams(BaseModel):
    """Query parameters of ``POST /v1/rerank`` (Elasticsearch's request template is fixed JSON, so the
    scoring variant is chosen in the URL: ``/v1/rerank?score=linear&first_stage=bm25``)."""

    model_config = ConfigDict(extra="forbid")

    score: Literal["probability", "linear"] = Field(
        default="probability",
        description="probability: P(relevant) in [0, 1] (the default). linear: for Elasticsearch's "
                    "`linear` retriever, the score's linear rest Σ β_c·(x_c − low_c) over c in {bow, "
                    "neural}, ≥ 0, so that β_first_stage·minmax(first stage) + score equals the fused "
                    "score plus one constant per model and first stage; no first_stage_scores.",
    )
    first_stage: str | None = Field(
        default=None, min_length=1,
        description="whose β to use (bm25, lmdirichlet, given); default: the model's"
    )
    all_unscored: Literal["score", "refuse"] = Field(
        default="score",
        description="score (the default): a window whose every document is unscored (null, blank, too "
                    "long) is answered, 0.0 each. refuse: such a window is a 400 naming `documents`; the "
                    "product's OpenSearch connector sends it, because neural-search's rerank processor "
                    "sends \"\" for every hit whose _source lacks rerank_text, and 0.0 for every hit would "
                    "pass for a ranking (with the pipeline's ignore_failure the hits keep the first stage's "
                    "order and scores, and verbose_pipeline says why).",
    )


#: The 400 of ``all_unscored=refuse``: what a whole window of blank documents means behind OpenSearch.
ALL_UNSCORED = ("no document has text to score (each is null, blank or over 100,000 characters); behind "
                "OpenSearch's rerank processor this is a search whose _source leaves out the "
                "document_fields (rerank_text): keep rerank_text in _source, or ask for "
                "\"fields\": [\"rerank_text\"]")


class EncodeRequest(BaseModel):
    """``POST /v1/encode``: the product's own answer (vector and BOW terms per text, for its pipelines)."""

    model_config = ConfigDict(extra="forbid")

    texts: list[Text] = Field(min_length=1)
    model: str | None = None


class RerankResult(BaseModel):
    index: int = Field(description="position of the document in the request")
    relevance_score: float = Field(
        ge=0.0, description="P(relevant) in [0, 1]; with score=linear the linear fused score, >= 0. "
                            "Written with at most 12 significant digits (at most 18 characters, the "
                            "longest float OpenSearch's ml-commons reads as a Double); the order of the "
                            "results comes from the unrounded scores. An unscored document gets 0.0, "
                            "the lowest value of either scale."
    )
    document: dict[str, Any] | None = None
    explain: dict[str, float | bool | str] | None = Field(
        default=None, description="score components; `cached`: the document's encoding came from the cache; "
                                  "`unscored`: why the document got the lowest score (null, blank, too_long)")


class RerankResponse(BaseModel):
    results: list[RerankResult]
    model: str


class RerankV2Result(BaseModel):
    index: int = Field(description="position of the document in the request")
    relevance_score: float = Field(ge=0.0, description="P(relevant) in [0, 1], as /v1/rerank's (same digits)")


class RerankV2Meta(BaseModel):
    api_version: dict[str, str] = Field(description='{"version": "2"}')


class RerankV2Response(BaseModel):
    id: str = Field(description="a fresh id per answer (uuid4), as Cohere's")
    results: list[RerankV2Result]
    meta: RerankV2Meta


class Embedding(BaseModel):
    vector: list[float]
    terms: dict[str, float] = Field(description="weighted bag of words, L2-normalised (rank_features)")
    bow_tokens: list[str] = Field(
        default_factory=list,
        description="the terms as index feature keys (dots percent-encoded), parallel to bow_weights: "
                    "the token_path of an Elasticsearch sparse_embedding endpoint")
    bow_weights: list[float] = Field(
        default_factory=list,
        description="|weight| of each bow_tokens entry (positive normal floats, as Lucene's FeatureField "
                    "takes): the weight_path of an Elasticsearch sparse_embedding endpoint")


class EncodeResponse(BaseModel):
    embeddings: list[Embedding]
    model: str
    dimension: int


class ErrorResponse(BaseModel):
    error: str
    field: str | None = None


def first_error(exc: ValidationError) -> tuple[str, str]:
    """(field path, message) of the most telling validation error, e.g. ``("documents.2.title", ...)``.

    A value of a ``str | DocumentIn`` union fails once per member; the member whose type the value
    has explains it best, so "is not a string" errors yield to any other. Member names are dropped
    from the location so the path names the request's own fields.
    """
    errors = exc.errors()
    mismatch = {"string_type", "model_type", "model_attributes_type", "dict_type", "none_required"}
    err = next((e for e in errors if e["type"] not in mismatch), errors[0])
    members = ("str", "DocumentIn", "RerankDocumentIn", "none", "TextPair", "list[TextPair]")
    parts = [str(p) for p in err["loc"] if p not in members]
    message = err["msg"].removeprefix("Value error, ")
    return ".".join(parts) or "(body)", message
