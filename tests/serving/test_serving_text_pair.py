"""``/v1/text-pair`` (issue 48, finding 12): OpenSearch's "Reranking by a field using an externally
hosted cross-encoder model" tutorial sends one ``{"inputs": {"text", "text_pair"}}`` per hit (Hugging
Face text-classification, as its SageMaker endpoint serves ``cross-encoder/ms-marco-MiniLM-L-6-v2``) and
reads ``$.score``. On real SemEval-2016 dev questions, for the bi-encoder (bow-cnn) and the
cross-encoder export: the answer is ``{"label": "LABEL_0", "score"}`` with /v1/rerank's relevance score
of that document for that query, a list of pairs is answered with the list of the same answers, a blank
text scores 0.0 and a blank query is a 400 naming the field. The node test:
``tests/opensearch/test_opensearch_cross_encoder_tutorial.py``."""

from __future__ import annotations

import pytest

from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app


@pytest.fixture(scope="module", params=["bow-cnn", "cross-encoder"])
def client(request, exported):
    if request.param == "cross-encoder":
        return create_app(request.getfixturevalue("pair_model")[1], onnx_threads=1).test_client()
    return create_app(ModelDirectory.load(exported["bow-cnn"], threads=1)).test_client()


def _text(question) -> str:
    return f"{question.title} {question.body}" if question.body.startswith("<") else question.title


def test_each_pair_scores_as_rerank_scores_the_document_for_the_query(client, semeval_dev):
    for rq in semeval_dev[:3]:
        query, docs = rq.query.title, [_text(c) for c in rq.candidates[:6]]
        ranked = client.post("/v1/rerank", json={"query": query, "documents": docs}).get_json()["results"]
        want = {r["index"]: r["relevance_score"] for r in ranked}
        answers = []
        for i, doc in enumerate(docs):
            resp = client.post("/v1/text-pair", json={"inputs": {"text": doc, "text_pair": query}})
            assert resp.status_code == 200, resp.get_json()
            answer = resp.get_json()
            assert set(answer) == {"label", "score"} and answer["label"] == "LABEL_0"
            assert answer["score"] == want[i] and 0.0 <= answer["score"] <= 1.0
            answers.append(answer)
        assert len({a["score"] for a in answers}) > 1  # a real model's scores, not one constant
        listed = client.post("/v1/text-pair", json={"inputs": [{"text": d, "text_pair": query} for d in docs],
                                                    "parameters": {"function_to_apply": "sigmoid"}})
        assert listed.status_code == 200 and listed.get_json() == answers


def test_blank_texts_and_bad_bodies(client, semeval_dev):
    query = semeval_dev[0].query.title
    for blank in ("", "  ", "!!!", None):
        resp = client.post("/v1/text-pair", json={"inputs": {"text": blank, "text_pair": query}})
        assert resp.status_code == 200 and resp.get_json()["score"] == 0.0, (blank, resp.get_json())
    for bad, field in ((" ", "inputs.text_pair"), ("!!!", "inputs.text_pair")):
        resp = client.post("/v1/text-pair", json={"inputs": {"text": query, "text_pair": bad}})
        assert resp.status_code == 400 and resp.get_json()["field"].startswith(field), resp.get_json()
    for body in ({"inputs": {"text": query}}, {"inputs": []}, {"inputs": {"text": query, "text_pair": query,
                                                                        "extra": 1}}, {"input": query}):
        assert client.post("/v1/text-pair", json=body).status_code == 400, body
    assert client.post("/v1/text-pair?x=1", json={"inputs": {"text": query, "text_pair": query}}
                       ).status_code == 400


def test_the_api_document_has_it(client):
    spec = client.get("/openapi.json").get_json()
    op = spec["paths"]["/v1/text-pair"]["post"]
    assert "TextPairRequest" in str(op["requestBody"]) and "PairScore" in str(op["responses"]["200"])
