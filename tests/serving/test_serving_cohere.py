"""Cohere's own clients against a live ``esrerank serve`` on loopback: ``cohere.Client`` (``/v1/rerank``),
``cohere.ClientV2``, LangChain's and LlamaIndex's ``CohereRerank`` (``/v2/rerank``). No mock on either
side: the subprocess is the command users run, the clients are the released packages (the ``dev``
extra). Each must get the scores ``/v1/rerank`` gives the same strings, and a client that is not
installed skips with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from client_libraries import needs
from live_sidecar import post, serve

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
TOKEN = "cohere-clients-token"
QUERY = "how do I install ubuntu from a usb stick"


@pytest.fixture(scope="module")
def titles() -> list[str]:
    lines = TITLES.read_text(encoding="utf-8").splitlines()
    return sorted({t.strip() for line in lines for t in line.split("\t")[1:] if t.strip()})[:40]


@pytest.fixture(scope="module")
def sidecar(exported, tmp_path_factory):
    """``esrerank serve`` (token from a two-line --token-file: the first line is the token) on a free port."""
    with serve(exported["bow-cnn"], TOKEN, tmp_path_factory.mktemp("token"),
               token_file_text=f"{TOKEN}\n# rotated 2026-01-01\n") as url:
        yield url


def _post(url: str, path: str, body: dict) -> tuple[int, dict]:
    return post(url + path, body, TOKEN)


@pytest.fixture(scope="module")
def expected(sidecar, titles) -> list[tuple[int, float]]:
    """/v1/rerank's (index, relevance_score), best first: what every client must get."""
    status, answer = _post(sidecar, "/v1/rerank", {"query": QUERY, "documents": titles})
    assert status == 200, answer
    return [(r["index"], r["relevance_score"]) for r in answer["results"]]


def test_v2_answers_cohere_v2_shape_with_v1_scores(sidecar, titles, expected):
    body = {"model": "rerank-v3.5", "query": QUERY, "documents": titles, "top_n": 5,
            "max_tokens_per_doc": None, "priority": 0}
    status, answer = _post(sidecar, "/v2/rerank", body)
    assert status == 200, answer
    assert set(answer) == {"id", "results", "meta"} and answer["meta"] == {"api_version": {"version": "2"}}
    assert [(r["index"], r["relevance_score"]) for r in answer["results"]] == expected[:5]
    assert all(set(r) == {"index", "relevance_score"} for r in answer["results"])
    _, again = _post(sidecar, "/v2/rerank", body)
    assert again["id"] != answer["id"]


@pytest.mark.parametrize(("body", "field"), [
    ({"query": QUERY, "documents": ["a"], "return_documents": True}, "return_documents"),  # v1 only
    ({"query": QUERY, "documents": ["a"], "first_stage_scores": [1.0]}, "first_stage_scores"),
    ({"query": QUERY, "documents": [{"title": "a"}]}, "documents.0"),  # v2 documents are strings
    ({"query": QUERY, "documents": ["a"], "max_tokens_per_doc": 0}, "max_tokens_per_doc"),
    ({"query": QUERY, "documents": ["a"], "priority": "high"}, "priority"),
    ({"query": "  ", "documents": ["a"]}, "query"),
    ({"query": QUERY, "documents": []}, "documents"),
])
def test_v2_refuses_unknown_or_invalid_fields(sidecar, body, field):
    status, answer = _post(sidecar, "/v2/rerank", body)
    assert status == 400 and answer["field"] == field, answer


@needs("cohere", "cohere")
def test_cohere_client_v1(sidecar, titles, expected):
    import cohere

    client = cohere.Client(api_key=TOKEN, base_url=sidecar, timeout=30)
    answer = client.rerank(model="esrerank", query=QUERY, documents=titles, top_n=3)
    assert [(r.index, r.relevance_score) for r in answer.results] == expected[:3]


@needs("cohere", "cohere")
def test_cohere_client_v2(sidecar, titles, expected):
    import cohere

    client = cohere.ClientV2(api_key=TOKEN, base_url=sidecar, timeout=30)
    answer = client.rerank(model="esrerank", query=QUERY, documents=titles, top_n=4, max_tokens_per_doc=None)
    assert [(r.index, r.relevance_score) for r in answer.results] == expected[:4]
    assert answer.id and answer.meta.api_version.version == "2"
    with pytest.raises(cohere.core.ApiError) as refused:  # a wrong token is refused, not scored
        cohere.ClientV2(api_key="wrong", base_url=sidecar, timeout=30).rerank(
            model="esrerank", query=QUERY, documents=titles)
    assert refused.value.status_code == 401


@needs("langchain_cohere", "langchain-cohere")
def test_langchain_cohere_rerank(sidecar, titles, expected):
    from langchain_cohere import CohereRerank
    from langchain_core.documents import Document

    reranker = CohereRerank(model="esrerank", cohere_api_key=TOKEN, base_url=sidecar, top_n=3)
    assert reranker.rerank(titles, QUERY, top_n=None) == [  # top_n=None: all, and it sends nulls
        {"index": i, "relevance_score": s} for i, s in expected]
    docs = [Document(page_content=t, metadata={"n": i}) for i, t in enumerate(titles)]
    kept = reranker.compress_documents(docs, QUERY)
    assert [(d.metadata["n"], d.metadata["relevance_score"]) for d in kept] == expected[:3]


@needs("llama_index.postprocessor.cohere_rerank", "llama-index-postprocessor-cohere-rerank")
def test_llama_index_cohere_rerank(sidecar, titles, expected):
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.postprocessor.cohere_rerank import CohereRerank

    reranker = CohereRerank(top_n=2, model="esrerank", api_key=TOKEN, base_url=sidecar)
    nodes = [NodeWithScore(node=TextNode(text=t, id_=str(i)), score=0.0) for i, t in enumerate(titles)]
    kept = reranker.postprocess_nodes(nodes, query_str=QUERY)
    assert [(int(n.node.node_id), n.score) for n in kept] == expected[:2]
