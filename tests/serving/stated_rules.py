"""The rules the sidecar's document states in words because JSON Schema cannot (``openapi.TEXT_RULE`` in
its description, ``openapi.CROSS_FIELD_RULES`` on /v1/rerank), restated from the document for the fuzzer:
a request that breaks one is rightly a 400 although it is valid against the schema. Used by the in-process
fuzz test (which sends such a case and exempts only "positive data acceptance" for it) and by
``st_hooks.py`` (which keeps ``st run`` from sending it as a valid case)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving.openapi import TEXT_OPTIONS_KEY
from es_plugin_bridge.serving.schemas import RerankDocumentIn, unscored_reason
from es_plugin_bridge.text.options import TextOptions
from es_plugin_bridge.text.pipeline import Preprocessor
from es_plugin_bridge.text.sidecar_text import sidecar_refusal


def served_preprocessor(raw_schema: dict[str, Any]) -> Preprocessor:
    """The served model's preprocessing, as its document gives it (``info.x-text-options``)."""
    return Preprocessor(TextOptions(**raw_schema["info"][TEXT_OPTIONS_KEY]))


def _unscored(document: Any, preprocessor: Preprocessor) -> bool:
    """Whether the server gives ``document`` the lowest score unscored (``schemas.unscored_reason``)."""
    if isinstance(document, dict):
        try:
            document = RerankDocumentIn.model_validate(document)
        except ValidationError:
            return False  # a 400 of its own, not this rule's
    return not isinstance(document, (str, RerankDocumentIn, type(None))) or \
        unscored_reason(document, preprocessor) is not None


def _required_texts(body: dict) -> list:
    """The texts of a body the server requires to be read as some word: queries and texts to embed."""
    texts = [body.get("query")] + list(body.get("texts") or [])
    inputs = body.get("inputs")
    items = inputs if isinstance(inputs, list) else [inputs]
    for item in items:
        if isinstance(item, dict):
            texts += [part.get("text") for part in item.get("content") or [] if isinstance(part, dict)]
            texts.append(item.get("text_pair"))
    return texts


def _reads_nothing(text: Any, preprocessor: Preprocessor) -> bool:
    if isinstance(text, dict) and isinstance(text.get("title"), str):
        text = Question("t", text["title"], text.get("body") if isinstance(text.get("body"), str) else "")
    if not isinstance(text, (str, Question)):
        return False
    return sidecar_refusal(text) is None and sidecar_refusal(text, preprocessor) is not None


def breaks_a_stated_rule(path: str, body: Any, query: dict | None, preprocessor: Preprocessor) -> bool:
    """Whether a request to ``path`` breaks one of the document's rules it cannot say in JSON Schema: a
    required text the served model reads as no word (``TEXT_RULE``), or on /v1/rerank one of
    ``CROSS_FIELD_RULES``."""
    if isinstance(body, dict) and any(_reads_nothing(t, preprocessor) for t in _required_texts(body)):
        return True
    if path != "/v1/rerank" or not isinstance(body, dict):
        return False
    query = query or {}
    scores, linear = body.get("first_stage_scores"), query.get("score") == "linear"
    stage_in_body, stage_in_url = body.get("first_stage"), query.get("first_stage")
    refuse_all = query.get("all_unscored") == "refuse"
    return ((scores is not None and len(scores) != len(body.get("documents", [])))
            or (refuse_all and all(_unscored(d, preprocessor) for d in body.get("documents", [])))
            or ((stage_in_body or stage_in_url) is not None and scores is None and not linear)
            or (linear and scores is not None)
            or (stage_in_body is not None and stage_in_url is not None and stage_in_body != stage_in_url))
