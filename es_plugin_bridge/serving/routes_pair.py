"""``POST /v1/text-pair``: one (text, text_pair) scored in the shape of a Hugging Face
``text-classification`` cross-encoder endpoint, so OpenSearch's tutorial "Reranking by a field using an
externally hosted cross-encoder model" (an ``ml_inference`` search response processor, ``one_to_one``,
then ``rerank.by_field``) runs against the sidecar with only its connector's URL and credential changed.

The tutorial's connector sends ``{"inputs": {"text": <the hit's field>, "text_pair": <the query>}}`` once
per hit and reads ``$.score`` of the answer: what transformers' ``TextClassificationPipeline`` answers a
dict input with (``{"label": "LABEL_0", "score": σ(logit)}``; a list of such dicts is answered with a
list). The score is the one ``/v1/rerank`` gives the text as a document for ``text_pair`` as the query
without first-stage scores: the cross-encoder's P(relevant) when the model is one, else the bi-encoder
model's own (bow-cnn: its β fusion of BOW and neural). A text that is null-like (blank, or read as no
token) gets 0.0 as a rerank document does; a blank ``text_pair`` is a 400, as a blank query is.
"""

from __future__ import annotations

from typing import Annotated, Any

from flask import Blueprint, Response, jsonify
from pydantic import BaseModel, ConfigDict, Field

from es_plugin_bridge.serving import web
from es_plugin_bridge.serving.routes_api import Reject, _no_query, _parse, _rejected
from es_plugin_bridge.serving.schemas import RerankRequest, RerankText, Text

bp = Blueprint("pair", __name__)
bp.register_error_handler(Reject, _rejected)  # a refusal answered 4xx naming the field, as the api's

#: The label a one-logit cross-encoder's ``config.json`` names its output (``id2label`` {0: LABEL_0}).
LABEL = "LABEL_0"
#: Pairs in one list request: as many as a rerank window's documents is more than the tutorial sends (1).
MAX_PAIRS = 1000


class TextPair(BaseModel):
    """One pair: ``text`` the candidate (the hit's field), ``text_pair`` the query."""

    model_config = ConfigDict(extra="forbid")

    text: RerankText = Field(description="the candidate (a title, optionally followed by its HTML body); "
                                         "null, blank or over 100,000 characters: score 0.0")
    text_pair: Text = Field(description="the query")


class TextPairRequest(BaseModel):
    """``POST /v1/text-pair``: Hugging Face's text-classification request for sentence pairs."""

    model_config = ConfigDict(extra="forbid")

    inputs: TextPair | Annotated[list[TextPair], Field(min_length=1, max_length=MAX_PAIRS)] = Field(
        description="one pair (answered with one object) or a list of pairs (answered with a list)")
    parameters: dict[str, Any] | None = Field(
        default=None, description="accepted and unused (Hugging Face's pipeline options)")


class PairScore(BaseModel):
    label: str = Field(description=f"always {LABEL}: the model has one output")
    score: float = Field(ge=0.0, le=1.0, description="P(relevant) in [0, 1], as /v1/rerank's relevance_score")


def _scores(pairs: list[TextPair]) -> list[float]:
    """Each pair's score: one rerank of the candidates of each distinct query (the tutorial sends one)."""
    scores: list[float] = [0.0] * len(pairs)
    by_query: dict[Any, list[int]] = {}
    for i, pair in enumerate(pairs):
        key = pair.text_pair if isinstance(pair.text_pair, str) else pair.text_pair.model_dump_json()
        by_query.setdefault(key, []).append(i)
    for at in by_query.values():
        documents = [pairs[i].text for i in at]
        req = RerankRequest.model_construct(query=pairs[at[0]].text_pair, documents=documents)
        for result in web.service().rerank_json(req)["results"]:
            scores[at[result["index"]]] = result["relevance_score"]
    return scores


@bp.post("/v1/text-pair")
def text_pair() -> Response:
    _no_query("/v1/text-pair")
    req = _parse(TextPairRequest)
    pairs = req.inputs if isinstance(req.inputs, list) else [req.inputs]
    most = web.settings().max_documents
    if len(pairs) > most:  # as /v1/rerank refuses a window over --max-documents
        raise Reject(413, f"inputs: {len(pairs)} items; this server takes at most {most} a request", "inputs")
    answers = [{"label": LABEL, "score": score} for score in _scores(pairs)]
    web.metrics().documents.labels("/v1/text-pair").inc(len(pairs))
    return jsonify(answers if isinstance(req.inputs, list) else answers[0])
