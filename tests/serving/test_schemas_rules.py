"""The sidecar's request schemas (``es_plugin_bridge/serving/schemas.py``) at their edges, on real
SemEval-2016 questions: texts of exactly 100,000 characters and one more, blank texts, the question a
document becomes (and its id), /v2 requests turned into /v1's, and the field and message a 400 names.
"""

from __future__ import annotations

import jsonschema_rs
import pytest
from pydantic import ValidationError

from es_plugin_bridge.data.questions import question_id
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving.schemas import (
    MAX_TEXT_CHARS,
    NOT_BLANK,
    DocumentIn,
    EncodeRequest,
    RerankDocumentIn,
    RerankRequest,
    RerankV2Request,
    first_error,
    is_blank,
    to_question,
    unscored_reason,
)


@pytest.fixture(scope="module")
def semeval(semeval_dev):
    return semeval_dev[:3]


def refusal(model, data) -> tuple[str, str]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return first_error(info.value)


# -- texts at their limits ------------------------------------------------------------------------------
def test_a_text_of_exactly_the_limit_is_accepted_and_one_more_is_refused(semeval):
    title = semeval[0].query.title
    exact = (title + " ") * (MAX_TEXT_CHARS // (len(title) + 1))
    exact += "x" * (MAX_TEXT_CHARS - len(exact))
    assert len(exact) == MAX_TEXT_CHARS
    assert RerankRequest.model_validate({"query": exact, "documents": ["a"]}).query == exact
    assert EncodeRequest.model_validate({"texts": ["a", exact]}).texts[1] == exact
    assert RerankV2Request.model_validate({"query": exact, "documents": ["a"]}).query == exact
    want = "text is longer than 100000 characters"
    assert refusal(RerankRequest, {"query": exact + "x", "documents": ["a"]}) == ("query", want)
    assert refusal(EncodeRequest, {"texts": ["a", exact + "x"]}) == ("texts.1", want)
    assert refusal(RerankV2Request, {"query": exact + "x", "documents": ["a"]}) == ("query", want)


@pytest.mark.parametrize("blank", ["", " ", "\n\t "])
def test_a_blank_text_is_refused_with_its_own_message(blank):
    empty = "text must not be empty"
    assert refusal(RerankRequest, {"query": blank, "documents": ["a"]}) == ("query", empty)
    assert refusal(EncodeRequest, {"texts": ["a", blank]}) == ("texts.1", empty)
    assert refusal(RerankV2Request, {"query": blank, "documents": ["a"]}) == ("query", empty)
    as_parts = refusal(EncodeRequest, {"texts": [{"title": blank}]})
    assert as_parts == ("texts.0.title", "title must not be empty")


def test_blank_means_python_whitespace_in_the_server_and_in_the_document():
    """One rule of "blank": the validators' (Python) and the document's pattern as a JSON Schema validator
    reads it (ECMA-262 dialect; jsonschema_rs, which schemathesis uses) agree on every code point. JSON
    Schema's plain ``\\S`` took U+0085 and U+001C–U+001F for text: the server then refused a text the
    document allowed."""
    spaces = [chr(c) for c in range(0x110000) if chr(c).isspace()]
    assert all(is_blank(ch) == ch.isspace() for ch in map(chr, range(0x110000)))
    document = jsonschema_rs.validator_for({"type": "string", **NOT_BLANK})
    for ch in [*spaces, "x", "\u200b", "\x00", "é"]:
        assert document.is_valid(ch) is not ch.isspace(), repr(ch)
        assert document.is_valid(" \t" + ch + "\u3000") is not ch.isspace(), repr(ch)
    assert jsonschema_rs.validator_for({"type": "string", "pattern": r"\S"}).is_valid("\x85")  # the old one
    for text in ("\x85", "\x1d\x1c", "\u2028\u3000"):
        assert refusal(EncodeRequest, {"texts": [text]}) == ("texts.0", "text must not be empty")
        assert unscored_reason(text) == "blank"


@pytest.mark.parametrize("field,minimum", [("top_n", 1), ("max_tokens_per_doc", 1), ("priority", 0)])
def test_an_integer_is_a_json_schema_integer(field, minimum):
    """JSON Schema's ``integer`` is any number with no fractional part, so ``80.0`` is one (the document
    allowed it and the server refused it); a string, a boolean, a fraction or a number below the
    minimum is still refused."""
    base = {"query": "How do I install Skype on 14.04?", "documents": ["apt-get install skype"]}
    assert getattr(RerankV2Request.model_validate({**base, field: 80.0}), field) == 80
    assert getattr(RerankV2Request.model_validate({**base, field: minimum}), field) == minimum
    for bad in ("80", True, 80.5, float(minimum - 1), minimum - 1):
        assert refusal(RerankV2Request, {**base, field: bad})[0] == field, bad
    assert RerankRequest.model_validate({**base, "top_n": 3.0}).top_n == 3


def test_a_rerank_candidate_at_the_limit_is_scored_and_one_more_is_not(semeval):
    """An engine needs a score per candidate, so an over-long one gets the lowest score instead of a 400;
    one of exactly 100,000 characters is still scored, title or body."""
    doc = semeval[0].candidates[0]
    exact = doc.body + "x" * (MAX_TEXT_CHARS - len(doc.body))
    assert unscored_reason(exact) is None and unscored_reason(exact + "x") == "too_long"
    assert unscored_reason(RerankDocumentIn(title=doc.title, body=exact)) is None
    assert unscored_reason(RerankDocumentIn(title=doc.title, body=exact + "x")) == "too_long"
    assert unscored_reason(RerankDocumentIn(title=exact + "x", body="")) == "too_long"
    assert unscored_reason(RerankDocumentIn(title=" ", body="\n")) == "blank"
    assert unscored_reason(None) == "null"


# -- the question a document becomes ------------------------------------------------------------------
def test_a_document_becomes_its_question_with_its_id_or_a_content_id(semeval):
    """``id`` is kept when given; otherwise the content id, which is the same whether the question comes
    as parts or as one text (title, then its HTML body) and differs between questions that share a
    title."""
    for rq in semeval:
        for doc in rq.candidates:
            body = f"<p>{doc.body}</p>"
            given = to_question(DocumentIn(id=doc.id, title=doc.title, body=body))
            assert given == Question(doc.id, doc.title, body)
            parts = to_question(DocumentIn(title=doc.title, body=body))
            assert parts == Question(question_id(doc.title, body), doc.title, body)
            assert to_question(doc.title + body).id == parts.id
            assert to_question(DocumentIn(title=doc.title)).id == question_id(doc.title)
    doc = semeval[0].candidates[0]
    one = to_question(DocumentIn(title=doc.title, body="<p>one</p>"))
    other = to_question(DocumentIn(title=doc.title, body="<p>other</p>"))
    assert one.id != other.id
    assert to_question(DocumentIn(title="<b>one</b>", body=doc.title)).id != to_question(
        DocumentIn(title="<b>other</b>", body=doc.title)).id


# -- /v2 as /v1 -------------------------------------------------------------------------------------------
def test_a_v2_request_is_the_same_v1_request(semeval):
    rq = semeval[0]
    docs = [f"{c.title}<p>{c.body}</p>" for c in rq.candidates] + [None, " "]
    v2 = RerankV2Request.model_validate({"model": "rerank-english-v3.0", "query": rq.query.title,
                                         "documents": docs, "top_n": 3, "max_tokens_per_doc": 512})
    v1 = v2.as_v1()
    assert isinstance(v1, RerankRequest)
    assert (v1.query, v1.documents, v1.top_n) == (rq.query.title, docs, 3)
    assert (v1.return_documents, v1.explain) == (False, False)
    assert (v1.first_stage_scores, v1.first_stage) == (None, None)
    assert v1 == RerankRequest.model_validate({"query": rq.query.title, "documents": docs, "top_n": 3})
    assert RerankV2Request.model_validate({"query": "q", "documents": ["a"]}).as_v1().top_n is None


# -- what a 400 names ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("model", "data", "field", "message"), [
    # a value of neither member's type: the string member's message, at the request's own path
    (RerankRequest, {"query": "q", "documents": ["a", 7]}, "documents.1", "Input should be a valid string"),
    (RerankRequest, {"query": 7, "documents": ["a"]}, "query", "Input should be a valid string"),
    (EncodeRequest, {"texts": ["a", [1]]}, "texts.1", "Input should be a valid string"),
    # an object: what is wrong inside it, without the member's name in the path
    (RerankRequest, {"query": {"title": " "}, "documents": ["a"]}, "query.title", "title must not be empty"),
    (RerankRequest, {"query": {"title": "t", "tags": []}, "documents": ["a"]}, "query.tags",
     "Extra inputs are not permitted"),
    (RerankRequest, {"query": "q", "documents": ["a", {"body": "b"}]}, "documents.1.title", "Field required"),
    # the validators' own messages, without pydantic's "Value error, "
    (RerankRequest, {"query": "q", "documents": ["a"], "first_stage_scores": [1e309]}, "first_stage_scores",
     "scores must be finite numbers"),
    # not an object at all
    (RerankRequest, [1], "(body)", "Input should be a valid dictionary or instance of RerankRequest"),
    (EncodeRequest, "texts", "(body)", "Input should be a valid dictionary or instance of EncodeRequest"),
])
def test_a_400_names_the_request_field_and_the_telling_message(model, data, field, message):
    assert refusal(model, data) == (field, message)
