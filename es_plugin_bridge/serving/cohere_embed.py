"""``/v1/embed`` and ``/v2/embed`` in Cohere's embed shapes, so that what is written for Cohere's embed
(``cohere.Client``/``ClientV2``, LangChain's ``CohereEmbeddings``, LlamaIndex's ``CohereEmbedding``,
OpenSearch's Cohere embed blueprint) gets the model's vectors unchanged. The product's own answer (vector
and BOW terms per text) is ``/v1/encode`` (``schemas.EncodeRequest``).

The shapes are those of the ``cohere`` SDK (``cohere/raw_base_client.py`` ``embed`` → ``v1/embed``,
``cohere/v2/raw_client.py`` → ``v2/embed``; answers ``EmbedFloatsResponse`` / ``EmbedByTypeResponse``):

- ``input_type`` (search_document, search_query, classification, clustering) is accepted and changes
  nothing: the product's encoders embed a query and a document alike (a symmetric model);
- ``truncate``: ``END`` (Cohere's default) is the model's own cut, what ``/v1/encode`` does; ``START``
  drops whole words from the start of the text until the rest fits; ``NONE`` refuses a text the model
  would cut, naming it (``serving.truncation``);
- ``embedding_types``: ``float`` only. Cohere's ``int8``/``uint8`` scales are not published, so the
  others are refused with a 400 rather than answered with numbers no Cohere index would match.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema, model_validator

from es_plugin_bridge.serving.schemas import MAX_TEXT_CHARS, NOT_BLANK, checked_text, json_int

#: The text the sidecar embeds: a non-blank string of at most 100,000 characters that the model reads as
#: some token (as /v1/encode's).
CohereText = Annotated[str, WithJsonSchema({"type": "string", **NOT_BLANK}), AfterValidator(checked_text)]
#: Text parts of one v2 ``inputs`` item: Cohere's own examples send one; a bound keeps validation cheap.
MAX_CONTENT_PARTS = 100
InputType = Literal["search_document", "search_query", "classification", "clustering"]
Truncate = Literal["NONE", "START", "END"]


def _float_only(value: str) -> str:
    if value != "float":
        raise ValueError(f"{value!r} is not answered: only float (Cohere's int8/uint8 scales are not "
                         "published, so no other type would match what Cohere computes)")
    return value


def _no_images(value: Any) -> None:
    if not (value is None or value == []):  # an image, or anything else ({} included): refused, named
        raise ValueError("the sidecar embeds text only; send texts (images: null or [])")
    return None


def _no_max_tokens(value: Any) -> None:
    if value is not None:
        raise ValueError("not taken: the model reads at most its own caps; choose the cut with truncate")
    return None


#: The embedding types answered; Cohere's others (int8, uint8, binary, ubinary, base64) are a 400.
EmbeddingType = Annotated[str, WithJsonSchema({"type": "string", "enum": ["float"]}),
                          AfterValidator(_float_only)]
#: Cohere's ``images``: null or empty (what a client sends unset); an image is refused, named.
Images = Annotated[Any, WithJsonSchema({"anyOf": [{"type": "null"}, {"type": "array", "maxItems": 0}]}),
                   AfterValidator(_no_images)]
#: v2's ``max_tokens``: null only (the document says so); a number is refused, named.
MaxTokens = Annotated[Any, WithJsonSchema({"type": "null"}), AfterValidator(_no_max_tokens)]

_INPUT_TYPE = ("accepted; every value gives the same vector (the model embeds queries and documents "
               "alike); `image` is refused: the sidecar embeds text")
_TRUNCATE = ("END (default): the model's own cut (title and body tokens past its caps are dropped, as "
             "/v1/encode); START: whole words are dropped from the start of the text until the rest fits; "
             "NONE: a text the model would cut is a 400 naming it")
_IMAGES = "null or empty: the sidecar embeds text only"
_TYPES = "only `float`: Cohere's int8/uint8 scales are not published, so the other types are refused (400)"


class CohereEmbedV1Request(BaseModel):
    """``POST /v1/embed``: Cohere's v1 embed request (``null`` is "not set", as the SDK sends it)."""

    model_config = ConfigDict(extra="forbid")

    texts: list[CohereText] = Field(min_length=1, description="the texts to embed")
    model: str | None = Field(default=None, description="accepted and unused: the sidecar serves one model")
    input_type: InputType | None = Field(default=None, description=_INPUT_TYPE)
    embedding_types: list[EmbeddingType] | None = Field(
        default=None, min_length=1,
        description=f"{_TYPES}; when sent, the answer is `embeddings_by_type` ({{float: [...]}})")
    truncate: Truncate | None = Field(default=None, description=_TRUNCATE)
    images: Images = Field(default=None, description=_IMAGES)


class TextContent(BaseModel):
    """One part of a v2 ``inputs`` item: text only."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["text"]
    text: CohereText


class EmbedInput(BaseModel):
    """A v2 ``inputs`` item: its text parts are joined by a space into one text, which is held to the same
    cap as one text (``MAX_TEXT_CHARS``): checking each part alone let 200 parts of 99,999 characters
    (20 MB) through as one text."""

    model_config = ConfigDict(extra="forbid")

    content: list[TextContent] = Field(min_length=1, max_length=MAX_CONTENT_PARTS)

    @model_validator(mode="after")
    def _joined_fits(self) -> EmbedInput:
        joined = sum(len(part.text) for part in self.content) + len(self.content) - 1
        if joined > MAX_TEXT_CHARS:
            raise ValueError(f"the joined text of an inputs item is {joined} characters, longer than "
                             f"{MAX_TEXT_CHARS} (the cap of one text)")
        return self


class CohereEmbedV2Request(BaseModel):
    """``POST /v2/embed``: Cohere's v2 embed request; ``texts`` or ``inputs``, not both."""

    # one of texts and inputs (null is not "not set" here: the SDK omits the one it does not send)
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "oneOf": [{"required": ["texts"]}, {"required": ["inputs"]}]})

    texts: list[CohereText] = Field(default=None, min_length=1, description="the texts to embed")
    inputs: list[EmbedInput] = Field(default=None, min_length=1,
                                     description="the texts as Cohere's inputs (text parts only)")
    model: str | None = Field(default=None, description="accepted and unused: the sidecar serves one model")
    input_type: InputType | None = Field(default=None, description=_INPUT_TYPE)
    embedding_types: list[EmbeddingType] | None = Field(
        default=None, min_length=1, description=f"{_TYPES}; default: [float]")
    truncate: Truncate | None = Field(default=None, description=_TRUNCATE)
    output_dimension: json_int(1) | None = Field(
        default=None, description="the model's own dimension only (this server's /openapi.json says it)")
    max_tokens: MaxTokens = Field(default=None, description="null only: the model's own caps apply")
    images: Images = Field(default=None, description=_IMAGES)
    priority: json_int(0) | None = Field(default=None, description="accepted and unused")

    @model_validator(mode="after")
    def _one_source(self) -> CohereEmbedV2Request:
        if (self.texts is None) == (self.inputs is None):
            raise ValueError("send texts or inputs (one of them)")
        return self

    def all_texts(self) -> list[str]:
        """The texts to embed, in order (an ``inputs`` item's text parts joined by a space)."""
        if self.texts is not None:
            return list(self.texts)
        return [" ".join(part.text for part in item.content) for item in self.inputs or []]


class ApiVersion(BaseModel):
    version: str


class BilledUnits(BaseModel):
    input_tokens: int = Field(description="tokens the model read of the texts (nothing is billed)")


class CohereMeta(BaseModel):
    api_version: ApiVersion
    billed_units: BilledUnits


class EmbeddingsByType(BaseModel):
    floats: list[list[float]] = Field(alias="float", description="one vector per text, in request order")


class CohereEmbedFloatsResponse(BaseModel):
    """v1 without ``embedding_types``: ``embeddings`` is a list of float vectors."""

    id: str = Field(description="a fresh id per answer (uuid4), as Cohere's")
    response_type: Literal["embeddings_floats"]
    embeddings: list[list[float]]
    texts: list[str]
    meta: CohereMeta


class CohereEmbedByTypeResponse(BaseModel):
    """v2, or v1 with ``embedding_types``: ``embeddings`` is ``{float: [...]}``."""

    id: str = Field(description="a fresh id per answer (uuid4), as Cohere's")
    response_type: Literal["embeddings_by_type"]
    embeddings: EmbeddingsByType
    texts: list[str]
    meta: CohereMeta


def cohere_answer(vectors: Sequence[list[float]], texts: Sequence[str], version: str, by_type: bool,
                  input_tokens: int) -> dict[str, Any]:
    """The Cohere answer (plain JSON values): ``embeddings_by_type`` or ``embeddings_floats``; ``meta``
    has ``billed_units`` because the ``cohere`` SDK reads it when it merges the answers of a split call."""
    meta = {"api_version": {"version": version}, "billed_units": {"input_tokens": input_tokens}}
    embeddings: Any = {"float": list(vectors)} if by_type else list(vectors)
    kind = "embeddings_by_type" if by_type else "embeddings_floats"
    return {"id": str(uuid.uuid4()), "response_type": kind, "embeddings": embeddings,
            "texts": list(texts), "meta": meta}


__all__ = ["CohereEmbedByTypeResponse", "CohereEmbedFloatsResponse", "CohereEmbedV1Request",
           "CohereEmbedV2Request", "cohere_answer"]
