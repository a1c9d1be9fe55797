"""Elasticsearch embeds (``elastic/ingest_pipeline.py``) and a user's own index (``elastic/user_index.py``),
checked without a cluster.

- Bodies: the two ``custom`` embedding endpoints, the ingest pipeline, ``_reindex`` against the
  specification's classes (``tests/tools/es_spec_shapes.json``).
- The endpoints as Elasticsearch runs them: the request template filled by commons-text's rules, the
  filled body posted to the real sidecar app, its answer read by ``MapPathExtractor`` and the
  ``text_embedding``/``sparse_embedding`` parsers (all restated from Elasticsearch's source in
  ``tests/tools/es_template.py``). What the pipeline stores must equal what ``es index`` stores when
  it embeds on the client: the same ``rerank_text``, vector and ``rank_features``.
- The Painless that builds ``rerank_text`` (restated line for line) equals ``rerank_text`` on
  every shipped AskUbuntu question, the ``${`` ones included.
- ``es index --dry-run --out``: the bulk file, and the native endpoint's template filled with its texts.
Whether Elasticsearch runs the pipeline as restated here is for ``tests/elastic/test_es_cluster_embeds.py``.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic import ingest_pipeline as pipeline
from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.user_index import (
    REINDEX_SCRIPT,
    SourceIndex,
    describe,
    in_place_properties,
    reindex_body,
)
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import rerank_text

sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
from es_template import (  # noqa: E402
    fill_request,
    parse_sparse_embeddings,
    parse_text_embeddings,
    validating_replace,
)

ROOT = Path(__file__).resolve().parents[2]
VAL = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
SPEC = json.loads((ROOT / "tests" / "tools" / "es_spec_shapes.json").read_text(encoding="utf-8"))["classes"]


def conforms(body: dict[str, Any], cls: str) -> None:
    fields, required = set(SPEC[cls]["fields"]), set(SPEC[cls]["required"])
    assert set(body) <= fields, f"{cls}: unknown {sorted(set(body) - fields)}"
    assert required <= set(body), f"{cls}: missing {sorted(required - set(body))}"


@pytest.fixture(scope="module")
def askubuntu() -> list[Question]:
    return list(read_spec(f"pairs:{VAL}").questions.values())


# --- bodies -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_type", ["text_embedding", "sparse_embedding"])
def test_embedding_endpoints_conform_to_the_custom_service(task_type):
    body = pipeline.embedding_endpoint("http://sidecar:8080/", "t0k", task_type)
    assert body["service"] == "custom"
    settings = body["service_settings"]
    conforms(settings, "CustomServiceSettings")
    assert settings["url"] == "http://sidecar:8080/v1/encode"
    assert "${input}" in settings["request"] and "${query}" not in settings["request"]
    assert set(settings["response"]) == {"json_parser"}
    with pytest.raises(ValueError):
        pipeline.embedding_endpoint("http://sidecar:8080", None, "rerank")


@pytest.mark.parametrize("user_text", [False, True])
def test_the_pipeline_conforms_to_the_ingest_specification(user_text):
    body = pipeline.pipeline_body(embed_id="e", bow_id="b", neural_similarity="cosine", user_text=user_text)
    conforms(body, "Pipeline")
    kinds = []
    for processor in body["processors"]:
        conforms(processor, "ProcessorContainer")
        (kind, inner), = processor.items()
        kinds.append(kind)
        if kind == "script":
            conforms(inner, "ScriptProcessor")
        elif kind == "inference":
            conforms(inner, "InferenceProcessor")
            conforms(inner["input_output"], "InputConfig")
            assert inner["input_output"]["input_field"] == mappings.RERANK_FIELD
    # rerank_text is built before anything is sent to an endpoint; the clean-up comes last
    assert kinds[-4:] == ["script", "inference", "inference", "script"]
    assert kinds[:2] == (["script", "html_strip"] if user_text else ["script", "inference"])
    outputs = [p["inference"]["input_output"]["output_field"] for p in body["processors"] if "inference" in p]
    assert outputs == [mappings.VECTOR_FIELD, mappings.BOW_FIELD]


def test_reindex_body_conforms_and_maps_their_fields():
    source = SourceIndex("forum", "question.title", "question.text", "qid", "standard", {}, {}, {})
    body = reindex_body(source, "esrerank-forum", "esrerank-esrerank-forum-ingest")
    conforms(body["source"], "ReindexSource")
    conforms(body["dest"], "ReindexDestination")
    assert body["dest"]["pipeline"] == "esrerank-esrerank-forum-ingest"
    assert body["script"]["params"] == {"title": "question.title", "body": "question.text", "id": "qid"}
    assert "ctx._id = i.toString()" in REINDEX_SCRIPT and "ctx._source = ['title'" in REINDEX_SCRIPT


# --- the Painless rerank_text --------------------------------------------------------------------------


def test_the_painless_rerank_text_is_the_products(askubuntu):
    odd = [
        Question("u1", "a <b> title ${HOME}", "\u00a0<p>starts with a no-break space</p>"),
        Question("u2", "tabs", "\t\n <p>html after control characters</p>"),
        Question("u3", "only spaces", "   "),
        Question("u4", "", "${input} body only"),
        Question("u5", "title only ${api_key}", ""),
    ]
    for q in askubuntu + odd:
        doc = {"title": q.title, "body": q.body}
        assert pipeline.rerank_text_as_painless(doc) == rerank_text(q), q.id
    nested = {"question": {"title": "t ${X}", "text": "b"}}
    assert pipeline.rerank_text_as_painless(nested, "question.title", "question.text") == "t &#36;{X}<p>b</p>"
    assert pipeline.rerank_text_as_painless({}) == ""


# --- the endpoints as Elasticsearch calls them ----------------------------------------------------------


def embed_through_elasticsearch(client, texts: list[str]) -> tuple[list[list[float]], list[dict[str, float]]]:
    """Fill each endpoint's template as Elasticsearch does, post it to the sidecar, parse the answer."""
    out = []
    parsers = (("text_embedding", parse_text_embeddings), ("sparse_embedding", parse_sparse_embeddings))
    for task_type, parse in parsers:
        settings = pipeline.embedding_endpoint("http://sidecar:8080", None, task_type)["service_settings"]
        body, headers = fill_request(settings, None, texts)
        resp = client.post("/v1/encode", data=body, headers=headers)
        assert resp.status_code == 200, resp.json
        parsed = parse(resp.json, settings["response"]["json_parser"])
        assert len(parsed) == len(texts)
        out.append(parsed)
    return out[0], out[1]


@pytest.mark.parametrize("kind", ["bow-cnn", "gru"])
def test_the_pipeline_stores_what_the_client_side_indexer_stores(exported, askubuntu, kind):
    """Real AskUbuntu questions (the ``${`` ones included) through the restated pipeline vs ``es index``'s
    client-side path: the same rerank_text, the same vector (float32 as Elasticsearch keeps it) and the
    same rank_features."""
    from es_plugin_bridge.bridge.sidecar_client import SidecarClient  # noqa: F401  (the client path's text)
    from es_plugin_bridge.serving import ModelDirectory
    from es_plugin_bridge.serving.app import create_app

    client = create_app(ModelDirectory.load(exported[kind], threads=1)).test_client()
    questions = [q for q in askubuntu if "${" in q.title + q.body] + askubuntu[:40]
    texts = [pipeline.rerank_text_as_painless({"title": q.title, "body": q.body}) for q in questions]
    vectors, sparse = embed_through_elasticsearch(client, texts)
    direct = client.post("/v1/encode", json={"texts": [rerank_text(q) for q in questions]}).json
    tokens = Preprocessor().tokens
    for q, text, vec, bow, emb in zip(questions, texts, vectors, sparse, direct["embeddings"], strict=True):
        by_client = mappings.document(q, tokens(q), emb)
        assert text == by_client[mappings.RERANK_FIELD]
        np.testing.assert_array_equal(np.float32(vec), np.float32(by_client[mappings.VECTOR_FIELD]))
        assert bow == by_client.get(mappings.BOW_FIELD, {})


def test_a_malformed_embed_answer_is_refused_by_the_parsers():
    """The parsers' own rules, so a sidecar answer of the wrong shape fails loudly, not silently."""
    parser = {"token_path": "$.embeddings[*].bow_tokens", "weight_path": "$.embeddings[*].bow_weights"}
    with pytest.raises(ValueError, match="equal"):
        parse_sparse_embeddings({"embeddings": [{"bow_tokens": ["a", "b"], "bow_weights": [0.5]}]}, parser)
    with pytest.raises(ValueError, match="Unable to find field"):
        parse_text_embeddings({"embeddings": [{}]}, {"text_embeddings": "$.embeddings[*].vector"})


# --- es index --dry-run ------------------------------------------------------------------------------------


def test_dry_run_writes_a_bulk_file_whose_texts_fill_the_native_template(cli, tmp_path, askubuntu):
    """The issue's check: the bulk file of the AskUbuntu sample holds no ``${``; filling the native
    endpoint's template from mappings/elasticsearch/ with its texts and the query ``echo ${HOME}``
    leaves no placeholder; titles and bodies parse back to the originals."""
    out = tmp_path / "bulk.ndjson"
    code, stdout, stderr = cli(["es", "index", f"pairs:{VAL}", "--dry-run", "--out", str(out),
                                "--index", "forum"])
    assert code == 0, stderr
    raw = out.read_text(encoding="utf-8")
    assert "${" not in raw
    lines = raw.splitlines()
    actions, sources = [json.loads(x) for x in lines[0::2]], [json.loads(x) for x in lines[1::2]]
    assert len(sources) == len(askubuntu) and {a["index"]["_index"] for a in actions} == {"forum"}
    by_id = {q.id: q for q in askubuntu}
    for action, source in zip(actions, sources, strict=True):
        q = by_id[action["index"]["_id"]]
        assert (source["title"], source["body"]) == (q.title, q.body)
        assert source["text"] == " ".join(Preprocessor().tokens(q))
    assert sum("${" in s["title"] + s["body"] for s in sources) >= 7
    endpoint = json.loads((ROOT / "mappings" / "elasticsearch" / "inference-endpoint-bm25.json").read_text())
    settings = endpoint["service_settings"]
    query = rerank_text(question_from_text("echo ${HOME}"))
    body, _ = fill_request(settings, query, [s[mappings.RERANK_FIELD] for s in sources])
    assert json.loads(body)["query"] == "echo &#36;{HOME}"
    validating_replace(settings["url"], {}, "url")


def test_dry_run_needs_out_and_writes_nothing_on_bad_input(cli, tmp_path):
    code, _, err = cli(["es", "index", f"pairs:{VAL}", "--dry-run"])
    assert code != 0 and "--dry-run and --out go together" in err
    out = tmp_path / "bulk.ndjson"
    code, _, err = cli(["es", "index", f"pairs:{tmp_path / 'missing.tsv'}", "--dry-run", "--out", str(out)])
    assert code != 0 and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.iterdir())


# --- a user's own index ---------------------------------------------------------------------------------


@pytest.fixture
def their_index() -> Iterator[tuple[str, dict[str, Any]]]:
    """127.0.0.1 answering ``GET /forum`` with a user's mapping (not Elasticsearch: shapes only)."""
    state: dict[str, Any] = {"answer": {}}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?")[0].strip("/")
            found = path in state["answer"]
            missing = {"error": {"type": "index_not_found_exception", "reason": path}, "status": 404}
            data = json.dumps(state["answer"] if found else missing).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("X-Elastic-Product", "Elasticsearch")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["answer"] = {"forum": {
        "mappings": {"_meta": {"owner": "forum-team"}, "properties": {
            "question": {"properties": {"title": {"type": "text", "analyzer": "english"},
                                        "text": {"type": "text"}}},
            "views": {"type": "integer"},
            "qid": {"type": "keyword"},
        }},
        "settings": {"index": {"analysis": {"analyzer": {"forum_folding": {"type": "custom",
                                                                           "tokenizer": "standard"}}}}},
    }}
    yield f"http://127.0.0.1:{server.server_address[1]}", state
    server.shutdown()
    server.server_close()


def test_describe_reads_their_fields_and_analyzer(their_index):
    from elasticsearch import Elasticsearch

    url, state = their_index
    client = Elasticsearch(url, request_timeout=5, max_retries=0)
    source = describe(client, "forum", "question.title", "question.text", "qid")
    assert source.analyzer == "english" and "forum_folding" in source.analysis["analyzer"]
    assert source.meta == {"owner": "forum-team"}
    with pytest.raises(UserError, match="--body-field question.body: index forum has no such field"):
        describe(client, "forum", "question.title", "question.body", None)
    with pytest.raises(UserError, match="--title-field views: a integer field, not text"):
        describe(client, "forum", "views", "question.text", None)
    with pytest.raises(UserError, match="no such index"):
        describe(client, "other", "title", "body", None)


def test_in_place_refuses_to_overwrite_a_field_and_keeps_their_analyzer():
    body = mappings.index_body(dimension=4)
    taken = SourceIndex("forum", "title", "body", None, "english", {}, {"title": {}, "text": {}}, {})
    with pytest.raises(UserError, match=r"already has field\(s\) text"):
        in_place_properties(taken, body["mappings"]["properties"])
    free = SourceIndex("forum", "title", "body", None, "english", {}, {"title": {}, "body": {}}, {})
    added = in_place_properties(free, body["mappings"]["properties"])
    assert set(added) == {"text", "rerank_text", "vector", "bow"}
    assert added["text"] == {"type": "text", "analyzer": "english"}  # default similarity: BM25


def test_a_copy_keeps_their_analysis_beside_the_products():
    analysis = {"analyzer": {"forum_folding": {"type": "custom", "tokenizer": "standard"}}}
    body = mappings.index_body(dimension=4, analyzer="forum_folding", analysis=analysis,
                               default_pipeline="esrerank-x-ingest")
    settings = body["settings"]
    assert settings["default_pipeline"] == "esrerank-x-ingest"
    assert {"forum_folding", mappings.ANALYZER} <= set(settings["analysis"]["analyzer"])
    text = body["mappings"]["properties"][mappings.TEXT_FIELD]
    assert text["analyzer"] == "forum_folding"
    assert {f["analyzer"] for f in text["fields"].values()} == {"forum_folding"}


# --- Elasticsearch embeds the query ----------------------------------------------------------------------


def test_hybrid_rrf_lets_elasticsearch_embed_the_query(recorder):  # noqa: F811 (the imported fixture)
    """With the index's ``text_embedding`` endpoint, ``rrf`` + HNSW ``knn`` + ``query_vector_builder``:
    one search, no sidecar call from the client; the query text is template-safe (Elasticsearch sends it
    through the endpoint's request template)."""
    from es_recorder import es_client

    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.modes.hybrid import HybridRrfMode

    rec, url = recorder
    rec.answers[("POST", "/forum/_search")] = {"hits": {"hits": [{"_id": "a", "_score": 0.03}]}}

    class NoSidecar:
        def embed(self, questions: list[Question]) -> list[dict[str, Any]]:
            raise AssertionError("the client must not embed the query")

    stage = ElasticsearchFirstStage(es_client(url), "forum", "bm25", lambda q: ["echo", "home"])
    mode = HybridRrfMode(stage, {}, 20, NoSidecar(), "cosine", "hnsw", in_elasticsearch=True,
                         embed_endpoint="esrerank-forum-embed")
    result = mode.search(Question("q", "echo ${HOME}", ""), 5)
    assert result.hits == [("a", 0.03)]
    (search,) = [r for r in rec.requests if r["path"] == "/forum/_search"]
    retriever = json.loads(search["body"])["retriever"]
    conforms(retriever["rrf"], "RRFRetriever")
    knn = retriever["rrf"]["retrievers"][1]["knn"]
    conforms(knn, "KnnRetriever")
    conforms(knn["query_vector_builder"], "QueryVectorBuilder")
    conforms(knn["query_vector_builder"]["text_embedding"], "TextEmbedding")
    assert "query_vector" not in knn
    assert knn["query_vector_builder"]["text_embedding"] == {"model_id": "esrerank-forum-embed",
                                                             "model_text": "echo &#36;{HOME}"}
