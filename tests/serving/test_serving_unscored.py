"""One bad document never fails a rerank window (issue 14, the sidecar's side).

Elasticsearch and OpenSearch need one score per document, and neural-search sends ``""`` for a hit that
lacks the rerank field (``DocumentContextSourceFetcher.contextFromSearchHit``). So a document that is
``null``, empty, whitespace only or over 100,000 characters gets the lowest score (0.0 on both scales:
probabilities, and ``score=linear``'s Σ β_c·(x_c − low_c) ≥ 0), comes after every scored one, is counted
in /metrics by reason and named in ``explain``; the other documents are scored exactly as if it were
not in the window. A document of another JSON type (a number, a list) is a client bug: still a 400.
Real AskUbuntu titles and bodies throughout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.schemas import MAX_TEXT_CHARS

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs"
LONG = "x" * (MAX_TEXT_CHARS + 1)
#: request position -> (bad document, the reason explain and /metrics give)
BAD = {1: ("", "blank"), 3: ("  \t\n ", "blank"), 4: (None, "null"), 6: (LONG, "too_long"),
       8: ({"title": " ", "body": ""}, "blank"), 9: ({"title": "t", "body": LONG}, "too_long")}


@pytest.fixture(scope="module")
def client(exported):
    return create_app(ModelDirectory.load(exported["bow-cnn"], threads=1)).test_client()


@pytest.fixture(scope="module")
def pages() -> list[tuple[str, list[str]]]:
    """(query, 8 candidates) from real AskUbuntu pairs: titles with their HTML bodies."""
    rows = [line.rstrip("\n").split("\t") for line in (SAMPLES / "val.tsv").open(encoding="utf-8")]
    cells = [cell for row in rows[:90] for cell in row[1:3]]
    return [(cells[i], cells[i + 1:i + 9]) for i in range(0, 90, 9)]


def _with_bad(good: list[str]) -> list:
    """The 8 good documents with the bad ones of ``BAD`` placed at their positions (14 in all)."""
    docs, it = [], iter(good)
    for i in range(len(good) + len(BAD)):
        docs.append(BAD[i][0] if i in BAD else next(it))
    return docs


@pytest.mark.parametrize("url", ["/v1/rerank", "/v1/rerank?score=linear"])
def test_bad_documents_get_the_lowest_score_and_the_rest_is_unchanged(client, pages, url):
    for query, good in pages:
        alone = client.post(url, json={"query": query, "documents": good, "explain": True})
        mixed = client.post(url, json={"query": query, "documents": _with_bad(good), "explain": True})
        assert alone.status_code == mixed.status_code == 200, mixed.get_json()
        results = mixed.get_json()["results"]
        assert sorted(r["index"] for r in results) == list(range(len(good) + len(BAD)))  # one per document
        tail = results[len(good):]
        assert [r["index"] for r in tail] == sorted(BAD)  # last, in request order
        assert all(r["relevance_score"] == 0.0 for r in tail)
        assert [r["explain"]["unscored"] for r in tail] == [BAD[i][1] for i in sorted(BAD)]
        positions = [i for i in range(len(good) + len(BAD)) if i not in BAD]  # request position of good[k]
        expected = [(positions[r["index"]], r["relevance_score"]) for r in alone.get_json()["results"]]
        assert [(r["index"], r["relevance_score"]) for r in results[:len(good)]] == expected
        assert min(score for _, score in expected) >= 0.0


def test_first_stage_scores_of_bad_documents_are_left_out(client, pages):
    """The fused score min-maxes the first stage over the scored documents only."""
    query, good = pages[0]
    scores = [float(10 - k) for k in range(len(good))]
    docs = _with_bad(good)
    it = iter(scores)  # an outlier score for each bad document, which would squash every other one
    fs = [1e6 if i in BAD else next(it) for i in range(len(docs))]
    alone = client.post("/v1/rerank", json={"query": query, "documents": good, "first_stage_scores": scores})
    mixed = client.post("/v1/rerank", json={"query": query, "documents": docs, "first_stage_scores": fs})
    assert alone.status_code == mixed.status_code == 200, mixed.get_json()
    got = [r["relevance_score"] for r in mixed.get_json()["results"][:len(good)]]
    assert got == [r["relevance_score"] for r in alone.get_json()["results"]]


def test_a_window_of_bad_documents_only_is_answered(client):
    resp = client.post("/v1/rerank", json={"query": "How do I install Ubuntu?", "documents": ["", None, " "],
                                           "return_documents": True, "explain": True})
    assert resp.status_code == 200, resp.get_json()
    results = resp.get_json()["results"]
    assert [(r["index"], r["relevance_score"]) for r in results] == [(0, 0.0), (1, 0.0), (2, 0.0)]
    assert results[1]["document"] == {"text": None}
    assert [r["explain"] for r in results] == [{"unscored": "blank", "cached": False},
                                               {"unscored": "null", "cached": False},
                                               {"unscored": "blank", "cached": False}]


def test_metrics_count_unscored_documents_by_reason(exported, pages):
    fresh = create_app(ModelDirectory.load(exported["bow-cnn"], threads=1)).test_client()
    query, good = pages[1]
    assert fresh.post("/v1/rerank", json={"query": query, "documents": _with_bad(good)}).status_code == 200
    text = fresh.get("/metrics").get_data(as_text=True)
    assert 'esrerank_documents_unscored_total{reason="blank"} 3.0' in text
    assert 'esrerank_documents_unscored_total{reason="null"} 1.0' in text
    assert 'esrerank_documents_unscored_total{reason="too_long"} 2.0' in text


@pytest.mark.parametrize(("document", "field"), [(7, "documents.1"), ([1], "documents.1"),
                                                  ({"title": None}, "documents.1"),
                                                  ({"body": "<p>b</p>"}, "documents.1.title")])
def test_a_document_of_the_wrong_json_type_is_still_a_400(client, document, field):
    resp = client.post("/v1/rerank", json={"query": "q", "documents": ["a", document]})
    assert resp.status_code == 400 and resp.get_json()["field"] == field, resp.get_json()


def test_a_blank_query_is_still_a_400(client):
    """The query is the whole window's: without it nothing can be scored."""
    resp = client.post("/v1/rerank", json={"query": " ", "documents": ["a"]})
    assert resp.status_code == 400 and resp.get_json()["field"] == "query"


def test_the_openapi_document_says_so(client):
    spec = client.get("/openapi.json").get_json()
    rerank = spec["paths"]["/v1/rerank"]["post"]
    assert "not scored" in rerank["description"]
    assert "esrerank_documents_unscored_total" in rerank["description"]
    documents = spec["components"]["schemas"]["RerankRequest"]["properties"]["documents"]
    assert {"type": "null"} in documents["items"]["anyOf"] and "lowest score" in documents["description"]
    result = spec["components"]["schemas"]["RerankResult"]["properties"]
    assert "unscored" in result["explain"]["description"]


def test_all_unscored_refuse_turns_a_window_of_no_text_into_a_400(client, pages):
    """``?all_unscored=refuse`` (what the product's OpenSearch connector sends, issue 48 finding 7):
    neural-search's rerank processor sends ``""`` for each hit whose ``_source`` lacks rerank_text, and a
    window of 0.0 scores would pass for a ranking. One scored document is enough to answer as before."""
    query, good = pages[0]
    for docs in (["", None, " "], ["", "<p></p>", "!!!"], [{"title": " ", "body": ""}]):
        resp = client.post("/v1/rerank?all_unscored=refuse", json={"query": query, "documents": docs})
        assert resp.status_code == 400, resp.get_json()
        body = resp.get_json()
        assert body["field"] == "documents" and "rerank_text" in body["error"], body
        assert client.post("/v1/rerank", json={"query": query, "documents": docs}).status_code == 200
    mixed = ["", good[0], None]
    alone = client.post("/v1/rerank", json={"query": query, "documents": mixed}).get_json()
    refused = client.post("/v1/rerank?all_unscored=refuse", json={"query": query, "documents": mixed})
    assert refused.status_code == 200 and refused.get_json() == alone
    assert client.post("/v1/rerank?all_unscored=maybe", json={"query": query, "documents": mixed}
                       ).status_code == 400
