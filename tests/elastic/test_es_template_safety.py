"""No text the product sends through an Elasticsearch inference template can break or hijack it.

Elasticsearch fills a ``custom`` endpoint's ``request`` template with the query and the documents'
field values and then refuses the call if any ``${...}`` is left (``ValidatingSubstitutor.java``,
restated with commons-text's rules in ``tests/tools/es_template.py``); it also substitutes inside the
inserted text, so ``${api_key}`` in a question would carry the secret into the body. Shell and config
snippets (``${HOME}``, ``${APACHE_LOG_DIR}``) are common on AskUbuntu: 7 questions of the shipped
``val.tsv`` hold ``${``. The product writes ``$`` of ``${`` as ``&#36;`` (``rerank_text``),
which its text pipeline decodes: the tokens, and so the sidecar's scores, are the question's own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.data.questions import split_title_body
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.setup import inference_endpoint
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import rerank_text

sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
from es_template import TemplateError, fill_request  # noqa: E402

VAL = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
SECRET = "s3cret-token"


@pytest.fixture(scope="module")
def dollar_questions() -> list[Question]:
    """Every shipped AskUbuntu question (title or body) that holds ``${``."""
    questions = read_spec(f"pairs:{VAL}").questions.values()
    found = [q for q in questions if "${" in q.title + q.body]
    assert len(found) >= 7, len(found)
    return found


def hostile() -> list[Question]:
    """Texts that would be substituted or refused: the endpoint's own variables, an escape, a default."""
    return [
        Question("h1", "echo ${HOME} prints nothing", "<p>In <code>${HOME}/.bashrc</code> I set it</p>"),
        Question("h2", "template ${input} in a title", "body with ${query} and ${api_key}"),
        Question("h3", "escaped $${HOME} and default ${X:-fallback}", "plain body ${ ${}"),
        Question("h4", "no body ${APACHE_LOG_DIR}", ""),
    ]


def settings() -> dict:
    return inference_endpoint("http://sidecar:8080", "bm25", SECRET)["service_settings"]


def received(body: str) -> tuple[str, list[str]]:
    """The query and documents the sidecar reads from the filled body."""
    parsed = json.loads(body)
    return parsed["query"], parsed["documents"]


def test_the_raw_texts_break_the_template(dollar_questions):
    """The check can fail: without the encoding, Elasticsearch refuses or rewrites these texts."""
    raw = [q.title + q.body for q in dollar_questions]
    with pytest.raises(TemplateError, match="Found placeholder"):
        fill_request(settings(), "how do I set a variable", raw)
    with pytest.raises(TemplateError, match="Infinite loop"):  # a document holding ${input}
        fill_request(settings(), "q", ["see ${input} here"])
    body, _ = fill_request(settings(), "q", ["token ${api_key}"])
    assert SECRET in body  # the secret pasted into the body


def test_encoded_texts_fill_the_template_and_reach_the_sidecar_unchanged(dollar_questions):
    docs = dollar_questions + hostile()
    texts = [rerank_text(q) for q in docs]
    assert not any("${" in t for t in texts)
    for query in [hostile()[0], hostile()[1], Question("q", "echo ${HOME}", "")]:
        body, headers = fill_request(settings(), rerank_text(query), texts)
        assert headers["Authorization"] == f"Bearer {SECRET}"
        assert SECRET not in body
        got_query, got_docs = received(body)
        assert got_query == rerank_text(query) and got_docs == texts  # nothing substituted


@pytest.mark.parametrize("code", ["keep", "remove", "prefix"])
def test_the_sidecar_reads_the_encoded_text_as_the_same_tokens(dollar_questions, code):
    """The sidecar splits a string into title and HTML body and tokenises both: the same tokens,
    whatever the model does with code blocks (where most ``${`` live)."""
    from es_plugin_bridge.text import TextOptions

    pipeline = Preprocessor(TextOptions(code=code, body_words=None))
    for q in dollar_questions + hostile():
        title, body = split_title_body(rerank_text(q))
        back = Question(q.id, title, body)
        assert pipeline.tokens(back) == pipeline.tokens(q), q.id
        assert pipeline.title_tokens(back) == pipeline.title_tokens(q)
    tokens = Preprocessor().tokens(hostile()[0])
    assert "home" in tokens  # the snippet's word survives the encoding


def test_sidecar_scores_of_encoded_texts_equal_the_original_questions(exported, dollar_questions):
    """End to end: the filled body posted to the sidecar scores as the questions themselves."""
    from es_plugin_bridge.serving import ModelDirectory
    from es_plugin_bridge.serving.app import create_app

    client = create_app(ModelDirectory.load(exported["bow-cnn"], threads=1)).test_client()
    docs = dollar_questions + hostile()
    query = Question("q", "how do I use ${HOME} in a script", "<p>echo ${HOME}</p>")
    body, _ = fill_request(settings(), rerank_text(query), [rerank_text(d) for d in docs])
    via_es = client.post("/v1/rerank", data=body, headers={"Content-Type": "application/json"})
    direct = client.post("/v1/rerank", json={
        "query": {"title": query.title, "body": query.body},
        "documents": [{"id": d.id, "title": d.title, "body": d.body} for d in docs],
    })
    assert via_es.status_code == direct.status_code == 200, (via_es.json, direct.json)

    def scores(answer: dict) -> np.ndarray:
        out = np.zeros(len(docs))
        for r in answer["results"]:
            out[r["index"]] = r["relevance_score"]
        return out

    np.testing.assert_allclose(scores(via_es.json), scores(direct.json), rtol=0, atol=1e-6)


def test_the_example_native_search_and_the_bulk_bodies_hold_no_placeholder():
    """What mappings/elasticsearch/ ships, and every document built for the index."""
    from es_plugin_bridge.elastic.write_mappings import bodies

    native = bodies()["search-native.json"]
    assert "${" not in json.dumps(native)
    for q in hostile():
        doc = mappings.document(q, Preprocessor().tokens(q))
        assert "${" not in doc[mappings.RERANK_FIELD]
        assert doc["title"] == q.title and doc["body"] == q.body  # the stored originals are untouched
