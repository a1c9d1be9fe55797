"""A text the model reads as no token is a blank text (issue 48, finding 10).

``"\\u200b"`` (a zero-width space), ``"!!!"`` and ``"<p></p>"`` are not blank characters, but the served
model's own preprocessing (``text.pipeline.Preprocessor``, config.json's ``text``) leaves no token of
them, so each got 200 and one and the same vector, while ``""`` is a 400. Now each is answered as the
blank text is, on every route: a 400 naming the field where a text to embed or a query is refused
(``/v1/embed``, ``/v2/embed``, ``/v1/encode``, a rerank's query), the lowest score and ``unscored: blank``
for a rerank document. Real AskUbuntu texts beside them are answered as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.text.sidecar_text import reads_nothing, sidecar_refusal

VAL = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
NOTHING = ["\u200b", "!!!", "<p></p>"]


@pytest.fixture(scope="module")
def model(exported):
    return ModelDirectory.load(exported["bow-cnn"], threads=1)


@pytest.fixture(scope="module")
def client(model):
    return create_app(model).test_client()


@pytest.fixture(scope="module")
def titles() -> list[str]:
    rows = VAL.read_text(encoding="utf-8").splitlines()[:6]
    return [row.split("\t")[1].split("<p>")[0].strip() for row in rows]


def _embed_bodies(text: str) -> dict[str, dict]:
    return {"/v1/embed": {"texts": [text]}, "/v1/encode": {"texts": [text]},
            "/v2/embed": {"texts": [text], "embedding_types": ["float"]},
            "/v2/embed#inputs": {"inputs": [{"content": [{"type": "text", "text": text}]}],
                                 "embedding_types": ["float"]}}


def test_the_models_preprocessing_reads_no_token_of_them(model, titles):
    from es_plugin_bridge.data.questions import question_from_text

    for text in NOTHING:
        assert model.preprocessor.tokens(question_from_text(text)) == []
        assert reads_nothing(question_from_text(text), model.preprocessor)
        assert sidecar_refusal(text) is None  # not blank as characters: only the model's reading tells
        assert sidecar_refusal(text, model.preprocessor) is not None
    assert all(sidecar_refusal(t, model.preprocessor) is None for t in titles)


@pytest.mark.parametrize("text", NOTHING)
def test_a_text_to_embed_that_reads_as_nothing_is_refused_as_a_blank_one(client, titles, text):
    for route, body in _embed_bodies(text).items():
        url = route.split("#")[0]
        blank = client.post(url, json=_embed_bodies("")[route])
        got = client.post(url, json=body)
        assert blank.status_code == got.status_code == 400, (route, got.get_json())
        assert got.get_json()["field"] == blank.get_json()["field"], route
        assert "preprocessed" in got.get_json()["error"], got.get_json()
        good = client.post(url, json=_embed_bodies(titles[0])[route])
        assert good.status_code == 200, (route, good.get_json())


@pytest.mark.parametrize("text", NOTHING)
def test_a_rerank_query_that_reads_as_nothing_is_refused_as_a_blank_one(client, titles, text):
    for url in ("/v1/rerank", "/v2/rerank"):
        got = client.post(url, json={"query": text, "documents": titles})
        assert got.status_code == 400 and got.get_json()["field"] == "query", got.get_json()
        got = client.post(url, json={"query": {"title": text, "body": ""}, "documents": titles})
        if url == "/v1/rerank":
            assert got.status_code == 400 and got.get_json()["field"].startswith("query"), got.get_json()


def test_rerank_documents_that_read_as_nothing_are_unscored_blank(client, titles):
    query = titles[0]
    alone = client.post("/v1/rerank", json={"query": query, "documents": titles[1:], "explain": True})
    docs = [*titles[1:], *NOTHING, {"title": "!!!", "body": "<p></p>"}]
    mixed = client.post("/v1/rerank", json={"query": query, "documents": docs, "explain": True})
    assert alone.status_code == mixed.status_code == 200, mixed.get_json()
    results = mixed.get_json()["results"]
    n = len(titles) - 1
    assert [(r["index"], r["relevance_score"]) for r in results[:n]] == \
        [(r["index"], r["relevance_score"]) for r in alone.get_json()["results"]]
    tail = results[n:]
    assert [r["index"] for r in tail] == list(range(n, len(docs)))
    assert all(r["relevance_score"] == 0.0 and r["explain"]["unscored"] == "blank" for r in tail)
    metrics = client.get("/metrics").get_data(as_text=True)
    assert any(line.startswith("esrerank_documents_unscored_total") and 'reason="blank"' in line
               for line in metrics.splitlines()), metrics[:2000]


def test_the_quick_look_at_a_texts_start_agrees_with_reading_it_whole(model):
    """``reads_nothing`` first reads a text's start up to its first ``<`` or ``&`` (shell snippets are
    full of ``&&``): where that start gives a token, so does the whole text. On every real AskUbuntu
    question of the sample (titles, and title + HTML body as one text), the quick answer is the whole
    reading's; and texts that are markup or entities first, then a word, still read as a word."""
    from es_plugin_bridge.data.questions import question_from_text
    from es_plugin_bridge.text.sidecar_text import _starts_with_a_word

    rows = VAL.read_text(encoding="utf-8").splitlines()
    texts = [part for row in rows for part in row.split("\t")[1:3]]
    snippets = [t for t in texts if "&" in t[:1000] or "<" in t[:1000]]
    assert len(snippets) > 100
    pre = model.preprocessor
    for text in texts + ["&amp;&amp; grub", "<p>&nbsp;</p> grub", "&& ls -la", "!!! && ???"]:
        question = question_from_text(text)
        whole = not pre.title_tokens(question) and not pre.body_tokens(question)
        assert reads_nothing(question, pre) == whole, text[:80]
        if _starts_with_a_word(question.title, pre):
            assert pre.title_tokens(question), text[:80]
