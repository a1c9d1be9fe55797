"""The Elasticsearch side with a pairwise model (the cross-encoder): ``es setup``, ``es index`` and
``es search`` on a real exported cross-encoder directory (``tests/tiny_models.py``'s ``pair_model``)
served by a real sidecar (``esrerank serve``'s ``Server`` on 127.0.0.1, token on).

The Elasticsearch here is ``tests/elastic/es_recorder.py``'s recorder: it answers each API in its
shape and records what the real ``elasticsearch`` client sends. It is never evidence that
Elasticsearch accepts the requests (``tests/elastic/test_es_cluster.py``'s cross-encoder test is, where
Docker runs); it shows what the product sends, creates and prints:

- ``es setup``: the token is checked on ``/v1/rerank`` (the sidecar refuses ``/v1/encode`` for this
  model: no call goes there), the index has no ``vector``/``bow`` fields and no ingest pipeline, one
  ``rerank`` endpoint per first stage with β is registered, and the lines say which modes run and why
  the others do not (the model has no vectors; on a cluster too old for native, that too).
- The registered endpoint, filled as Elasticsearch fills it (``tests/tools/es_template.py``, restated
  from ``CustomRequest.java``/``ValidatingSubstitutor.java``), is answered by the real sidecar in the
  shape its ``json_parser`` reads (``MapPathExtractor.java``).
- ``es index`` sends the text only (``--dry-run`` too); ``es search`` runs native and bridge and
  refuses vectors, hybrid and hybrid-rrf in one line before any search or sidecar call.
- ``--from-index``/``--in-place`` with no vectors: a scripts-only pipeline fills ``text`` and
  ``rerank_text`` (no inference endpoint), so native runs on a user's own index too.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from es_recorder import es_client

from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo
from es_plugin_bridge.elastic.modes import vector_modes
from es_plugin_bridge.elastic.modes.factory import make_mode
from es_plugin_bridge.elastic.provision import FromIndex, provision
from es_plugin_bridge.elastic.setup import FIRST_STAGES, IndexMeta, meta_for_model
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.model_dir import ModelDirectory
from es_plugin_bridge.text import TextOptions
from es_plugin_bridge.text.sidecar_text import rerank_text

sys.path.insert(0, str(Path(__file__).parents[1] / "tools"))
from es_template import extract, fill_request  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VAL = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
SPEC = json.loads((ROOT / "tests" / "tools" / "es_spec_shapes.json").read_text(encoding="utf-8"))["classes"]
TOKEN = "pair-s3cret"
ROOT_DOC = {"name": "recorder", "version": {"number": "9.1.4"}, "tagline": "You Know, for Search"}


def conforms(body: dict[str, Any], cls: str) -> None:
    """``body``'s keys are fields of the specification's class ``cls`` and its required fields are set."""
    fields, required = set(SPEC[cls]["fields"]), set(SPEC[cls]["required"])
    assert set(body) <= fields, f"{cls}: unknown {sorted(set(body) - fields)}"
    assert required <= set(body), f"{cls}: missing {sorted(required - set(body))}"


@pytest.fixture(scope="module")
def sidecar(pair_model) -> Iterator[tuple[str, Any]]:
    """``esrerank serve`` of the exported cross-encoder on 127.0.0.1 (its own waitress server and
    token check): (URL, the Flask app, whose ``/metrics`` counts the requests by endpoint)."""
    from es_plugin_bridge.serving.app import create_app
    from es_plugin_bridge.serving.server import Server
    from es_plugin_bridge.serving.settings import Settings

    settings = Settings(model_dir=pair_model[1], port=0, token=TOKEN, threads=2, onnx_threads=1)
    app = create_app(settings)
    server = Server.for_app(app)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield server.url, app
    finally:
        server.close()
        thread.join(timeout=5)


def requests_to(app: Any, endpoint: str) -> float:
    """How many requests the sidecar answered on ``endpoint`` (any status), from its ``/metrics``."""
    scrape = app.test_client().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    text = scrape.get_data(as_text=True)
    pattern = rf'^esrerank_requests_total\{{[^}}]*endpoint="{re.escape(endpoint)}"[^}}]*\}} (\S+)$'
    return sum(float(m.group(1)) for m in re.finditer(pattern, text, re.M))


def answer(rec: Any, key: tuple[str, str], value: Any) -> None:
    """Script an answer; ``GET /`` is kept last, since the recorder matches path prefixes in order."""
    rec.answers.pop(("GET", "/"), None)
    rec.answers[key] = value
    rec.answers[("GET", "/")] = ROOT_DOC


def cluster_answers(rec: Any, licence: str = "trial", version: str = "9.1.4") -> None:
    answer(rec, ("GET", "/_license"), {"license": {"type": licence, "status": "active"}})
    answer(rec, ("HEAD", "/questions"), (404, {}))
    answer(rec, ("GET", "/_inference/"), (404, {"error": "missing"}))
    answer(rec, ("PUT", "/_inference/"), {"inference_id": "x"})
    answer(rec, ("PUT", "/_ingest/pipeline/"), {"acknowledged": True})
    answer(rec, ("PUT", "/questions"), {"acknowledged": True, "index": "questions"})
    rec.answers[("GET", "/")] = {**ROOT_DOC, "version": {"number": version}}


def writes(rec: Any) -> list[str]:
    return [r["path"] for r in rec.requests if r["method"] in ("PUT", "POST")]


def sent(rec: Any, method: str, path: str) -> dict[str, Any]:
    (request,) = [r for r in rec.requests if r["method"] == method and r["path"] == path]
    return json.loads(request["body"])


def common(es_url: str, sidecar_url: str) -> list[str]:
    return ["--es-url", es_url, "--sidecar", sidecar_url, "--token", TOKEN]


@pytest.fixture(scope="module")
def stages(pair_model) -> list[str]:
    """The first stages Elasticsearch can run that the exported model has a fitted β for."""
    fusion = ModelDirectory.load(pair_model[1]).fusion
    found = [s for s in FIRST_STAGES if s in fusion]
    assert found, f"the tiny cross-encoder has no β for {FIRST_STAGES} (it has {sorted(fusion)})"
    return found


# --- es setup ---------------------------------------------------------------------------------------------


def test_setup_makes_a_text_index_and_native_endpoints_and_says_which_modes_run(
        pair_model, sidecar, recorder, cli, stages):  # noqa: F811
    rec, es_url = recorder
    url, app = sidecar
    cluster_answers(rec)
    embeds, reranks = requests_to(app, "/v1/encode"), requests_to(app, "/v1/rerank")
    code, out, err = cli(["es", "setup", str(pair_model[1]), "--index", "questions",
                          "--sidecar-from-es", "http://sidecar:8080", *common(es_url, url)])
    assert code == 0, err
    # the token check: one /v1/rerank, no /v1/encode (which the sidecar refuses for this model)
    assert requests_to(app, "/v1/encode") == embeds and requests_to(app, "/v1/rerank") == reranks + 1
    assert writes(rec) == [f"/_inference/rerank/esrerank-questions-{s}" for s in stages] + ["/questions"]
    index = sent(rec, "PUT", "/questions")
    properties = index["mappings"]["properties"]
    assert mappings.VECTOR_FIELD not in properties and mappings.BOW_FIELD not in properties
    assert properties[mappings.RERANK_FIELD] == {"type": "text", "index": False}
    assert "default_pipeline" not in index["settings"]
    stored = IndexMeta.from_dict(index["mappings"]["_meta"]["esrerank"], "questions")
    assert stored.pairwise and stored.dimension is None and stored.embedding == {}
    assert stored.model_type == "cross-encoder" and stored.neural_similarity == "sigmoid"
    assert stored.inference == {s: f"esrerank-questions-{s}" for s in stages}
    lines = out.splitlines()
    assert "mode native:  ready" in lines and "mode bridge:  ready" in lines
    why = "reads a query and a document together and has no vector per text"
    for mode in ("vectors", "hybrid"):
        (line,) = [x for x in lines if x.startswith(f"mode {mode}:")]
        assert "unavailable" in line and why in line and "use native or bridge" in line, line
    assert any(x.startswith("Elasticsearch embeds: nothing to embed") and "text only" in x for x in lines)
    assert "(cross-encoder, no vectors)" in out and "next: esrerank es index SPEC --index questions" in out


def test_the_registered_endpoint_is_answered_by_the_sidecar_as_its_parser_reads(
        pair_model, sidecar, recorder, cli, stages):  # noqa: F811
    """Fill the endpoint ``es setup`` sent as Elasticsearch fills it and post it to the sidecar."""
    rec, es_url = recorder
    url, _ = sidecar
    cluster_answers(rec)
    code, _, err = cli(["es", "setup", str(pair_model[1]), "--index", "questions", *common(es_url, url)])
    assert code == 0, err
    body = sent(rec, "PUT", f"/_inference/rerank/esrerank-questions-{stages[0]}")
    assert body["service"] == "custom" and set(body) == {"service", "service_settings"}
    settings = body["service_settings"]
    conforms(settings, "CustomServiceSettings")  # elasticsearch-specification inference/put_custom
    assert settings["url"] == f"{url}/v1/rerank?score=linear&first_stage={stages[0]}"
    assert settings["secret_parameters"] == {"api_key": TOKEN}
    questions = list(read_spec(f"pairs:{VAL}").questions.values())[:6]
    query, documents = questions[0], questions[1:]
    filled, headers = fill_request(settings, rerank_text(query),
                                   [rerank_text(d) for d in documents])
    request = urllib.request.Request(settings["url"], data=filled.encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=30) as resp:
        got = json.loads(resp.read())
    parser = settings["response"]["json_parser"]
    scores, order = extract(got, parser["relevance_score"]), extract(got, parser["reranked_index"])
    assert sorted(order) == list(range(len(documents)))  # type: ignore[arg-type]
    assert all(s >= 0 for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[union-attr]


def test_a_cluster_too_old_for_native_still_gets_the_index_and_says_why(
        pair_model, sidecar, recorder, cli):  # noqa: F811
    rec, es_url = recorder
    url, _ = sidecar
    cluster_answers(rec, version="9.0.3")
    code, out, err = cli(["es", "setup", str(pair_model[1]), "--index", "questions", *common(es_url, url)])
    assert code == 0, err
    assert writes(rec) == ["/questions"]  # no endpoint, no pipeline
    assert "mode native:  unavailable: mode native needs Elasticsearch 8.19+ or 9.1+" in out
    assert "mode bridge:  ready" in out and "mode vectors: unavailable" in out


def test_a_wrong_token_fails_setup_on_rerank_before_anything_is_created(
        pair_model, sidecar, recorder, cli):  # noqa: F811
    rec, es_url = recorder
    url, _ = sidecar
    cluster_answers(rec)
    code, _, err = cli(["es", "setup", str(pair_model[1]), "--index", "questions", "--es-url", es_url,
                        "--sidecar", url, "--token", "wrong"])
    assert code != 0 and "sidecar answered 401 to /v1/rerank" in err and "Traceback" not in err
    assert writes(rec) == []


def test_the_meta_comes_from_the_directorys_capability(pair_model, sidecar):
    """``pairwise`` is read from the loaded directory (its input adapter), not from the type's name."""
    model = ModelDirectory.load(pair_model[1])
    ready = {"model": "m", "model_type": model.config.model_type, "dimension": model.config.dimension}
    meta = meta_for_model(model, ready, TextOptions())
    assert meta.pairwise is model.pairwise is True and meta.dimension is None
    assert IndexMeta.from_dict(meta.as_dict(), "x") == meta
    old = {k: v for k, v in meta.as_dict().items() if k != "pairwise"}  # an index from before the key
    assert IndexMeta.from_dict(old, "x").pairwise is False


# --- es index ---------------------------------------------------------------------------------------------


def setup_meta(pair_model: Any, stages: list[str]) -> dict[str, Any]:
    model = ModelDirectory.load(pair_model[1])
    ready = {"model": "tiny", "model_type": model.config.model_type, "dimension": model.config.dimension}
    meta = meta_for_model(model, ready, TextOptions())
    inference = {s: f"esrerank-questions-{s}" for s in stages}
    return {**meta.as_dict(), "inference": inference}


def test_index_sends_the_text_only_and_never_calls_embed(
        pair_model, sidecar, recorder, cli, tmp_path, stages):  # noqa: F811
    rec, es_url = recorder
    url, app = sidecar
    data = tmp_path / "two-pairs.tsv"  # the first two pairs of the shipped AskUbuntu sample
    data.write_text("".join(VAL.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
    ids = list(read_spec(f"pairs:{data}").questions)
    answer(rec, ("GET", "/questions/_mapping"),
           {"questions": {"mappings": {"_meta": {"esrerank": setup_meta(pair_model, stages)}}}})
    answer(rec, ("HEAD", "/questions"), {})
    answer(rec, ("PUT", "/questions/_bulk"), {"took": 1, "errors": False, "items": [
        {"index": {"_index": "questions", "_id": i, "status": 201, "result": "created"}} for i in ids]})
    answer(rec, ("POST", "/questions/_refresh"), {"_shards": {"total": 1, "successful": 1, "failed": 0}})
    embeds = requests_to(app, "/v1/encode")
    code, out, err = cli(["es", "index", f"pairs:{data}", "--index", "questions", "--no-progress",
                          *common(es_url, url)])
    assert code == 0, err
    assert "holds no vectors" in err and "indexing the text only" in err and "cross-encoder" in err
    assert f"read {len(ids)}" in out and f"indexed {len(ids)}" in out and "failed 0" in out
    assert requests_to(app, "/v1/encode") == embeds
    (bulk,) = [r for r in rec.requests if r["path"] == "/questions/_bulk"]
    lines = [json.loads(x) for x in bulk["body"].splitlines() if x.strip()]
    sources = lines[1::2]
    assert [a["index"]["_id"] for a in lines[0::2]] == ids
    assert all(set(s) == {"title", "body", mappings.TEXT_FIELD, mappings.RERANK_FIELD} for s in sources)


def test_dry_run_writes_the_text_only_and_says_so(cli, tmp_path):
    out_file = tmp_path / "bulk.ndjson"
    code, out, err = cli(["es", "index", f"pairs:{VAL}", "--index", "questions", "--dry-run",
                          "--out", str(out_file)])
    assert code == 0, err
    assert "_bulk NDJSON of the text" in out and "where the index holds vectors" in out
    sources = [json.loads(x) for x in out_file.read_text(encoding="utf-8").splitlines()][1::2]
    assert sources and all(mappings.VECTOR_FIELD not in s and mappings.BOW_FIELD not in s for s in sources)


# --- es search --------------------------------------------------------------------------------------------


def search_answers(rec: Any, pair_model: Any, stages: list[str], hits: list[dict[str, Any]]) -> None:
    answer(rec, ("GET", "/_license"), {"license": {"type": "trial", "status": "active"}})
    answer(rec, ("GET", "/questions/_mapping"),
           {"questions": {"mappings": {"_meta": {"esrerank": setup_meta(pair_model, stages)}}}})
    answer(rec, ("POST", "/questions/_search"), {"hits": {"hits": hits}})
    answer(rec, ("GET", "/questions/_doc/"),
           {"_id": "x", "found": True, "_source": {"title": "t", "body": ""}})


@pytest.mark.parametrize("mode", vector_modes())
def test_modes_that_need_vectors_are_refused_in_one_line(
        pair_model, sidecar, recorder, cli, stages, mode):  # noqa: F811
    rec, es_url = recorder
    url, app = sidecar
    search_answers(rec, pair_model, stages, [])
    embeds = requests_to(app, "/v1/encode")
    code, out, err = cli(["es", "search", "how do I upgrade", "--mode", mode, "--index", "questions",
                          *common(es_url, url)])
    assert code != 0 and out == ""
    message = [x for x in err.splitlines() if x.strip()]
    assert message == [f"error: mode {mode} needs the model's vectors; tiny (cross-encoder) reads a query "
                       "and a document together and has no vectors: use --mode native or --mode bridge"], err
    assert not [r for r in rec.requests if r["path"].endswith("/_search")]
    assert requests_to(app, "/v1/encode") == embeds


def test_es_search_top_10_is_one_request_that_brings_the_titles(
        pair_model, sidecar, recorder, cli, stages):  # noqa: F811
    """``es search --top 10`` used to send its search with ``_source: false`` and then GET each hit's
    title: 1 + 10 requests. The search now asks for the title and body fields (the search API's
    ``_source`` ``includes``: Elasticsearch returns those fields of each hit's source, ``SearchRequest``
    / ``FetchSourceContext``), and the titles shown are the ones that search brought."""
    rec, es_url = recorder
    url, _ = sidecar
    hits = [{"_id": f"d{i}", "_score": 10.0 - i, "_source": {"title": f"title {i}", "body": "<p>b</p>"}}
            for i in range(10)]
    search_answers(rec, pair_model, stages, hits)
    code, out, err = cli(["es", "search", "how do I upgrade", "--mode", "native", "--json", "--top", "10",
                          "--first-stage", stages[0], "--index", "questions", *common(es_url, url)])
    assert code == 0, err
    assert [h["title"] for h in json.loads(out)["hits"]] == [f"title {i}" for i in range(10)]
    to_index = [r for r in rec.requests
                if r["path"].startswith("/questions/") and r["path"] != "/questions/_mapping"]
    assert [r["path"] for r in to_index] == ["/questions/_search"], [r["path"] for r in to_index]
    assert json.loads(to_index[0]["body"])["_source"] == {"includes": ["title", "body"]}


def test_native_search_sends_the_endpoint_es_setup_registered(
        pair_model, sidecar, recorder, cli, stages):  # noqa: F811
    rec, es_url = recorder
    url, _ = sidecar
    search_answers(rec, pair_model, stages, [{"_id": "a", "_score": 2.5, "_source": {"title": "t"}},
                                             {"_id": "b", "_score": 1.5, "_source": {"title": "u"}}])
    code, out, err = cli(["es", "search", "how do I upgrade", "--mode", "native", "--json",
                          "--first-stage", stages[0], "--index", "questions", *common(es_url, url)])
    assert code == 0, err
    result = json.loads(out)
    assert result["reranked"] is True and [h["id"] for h in result["hits"]] == ["a", "b"]
    (search,) = [r for r in rec.requests if r["path"] == "/questions/_search"]
    linear = json.loads(search["body"])["retriever"]["linear"]
    reranker = linear["retrievers"][1]["retriever"]["text_similarity_reranker"]
    conforms(reranker, "TextSimilarityReranker")
    assert reranker["inference_id"] == f"esrerank-questions-{stages[0]}"
    assert reranker["field"] == mappings.RERANK_FIELD


def test_bridge_search_reranks_through_the_sidecar(pair_model, sidecar, recorder, cli, stages):  # noqa: F811
    rec, es_url = recorder
    url, app = sidecar
    questions = list(read_spec(f"pairs:{VAL}").questions.values())[:5]
    hits = [{"_id": q.id, "_score": 5.0 - i, "_source": {"title": q.title, "body": q.body}}
            for i, q in enumerate(questions)]
    search_answers(rec, pair_model, stages, hits)
    reranks = requests_to(app, "/v1/rerank")
    code, out, err = cli(["es", "search", questions[0].title, "--mode", "bridge", "--json", "--timeout", "30",
                          "--first-stage", stages[0], "--index", "questions", *common(es_url, url)])
    assert code == 0, err
    result = json.loads(out)
    assert result["reranked"] is True and result["fallback_reason"] is None, result
    assert sorted(h["id"] for h in result["hits"]) == sorted(q.id for q in questions)
    assert requests_to(app, "/v1/rerank") == reranks + 1


def test_make_mode_refuses_before_asking_the_cluster():
    """The refusal comes first: a basic cluster would otherwise answer about its licence instead."""
    meta = IndexMeta(model="m", model_type="any-pair-type", dimension=None, neural_similarity="sigmoid",
                     fusion={"bm25": {"first_stage": 0.2, "bow": 0.1, "neural": 0.7}}, text={}, pairwise=True)

    class Stage:
        index, similarity = "questions", "bm25"

    for mode in vector_modes():
        with pytest.raises(UserError, match=rf"^mode {mode} needs the model's vectors; m \(any-pair-type\)"):
            make_mode(mode, Stage(), meta, window=10, sidecar=SidecarTarget("http://x:1", None, 1.0),  # type: ignore[arg-type]
                      cluster=ClusterInfo((9, 1, 0), "basic", True))


# --- a user's own index -----------------------------------------------------------------------------------


@pytest.mark.parametrize("in_place", [False, True])
def test_from_index_without_vectors_fills_text_through_a_scripts_only_pipeline(recorder, in_place):  # noqa: F811
    rec, es_url = recorder
    cluster_answers(rec)
    answer(rec, ("GET", "/forum"), {"forum": {"mappings": {"properties": {
        "question": {"properties": {"title": {"type": "text", "analyzer": "english"},
                                    "text": {"type": "text"}}}}}, "settings": {"index": {}}}})
    answer(rec, ("PUT", "/forum/_mapping"), {"acknowledged": True})
    answer(rec, ("POST", "/forum/_update_by_query"), {"task": "n:1"})
    answer(rec, ("POST", "/_reindex"), {"task": "n:1"})
    answer(rec, ("GET", "/_tasks/"), {"completed": True, "response": {"created": 2, "updated": 0}})
    answer(rec, ("POST", "/"), {"_shards": {"total": 1, "successful": 1, "failed": 0}})  # _refresh
    meta = IndexMeta(model="tiny", model_type="cross-encoder", dimension=None, neural_similarity="sigmoid",
                     fusion={"bm25": {"first_stage": 0.2, "bow": 0.1, "neural": 0.7}}, text={}, pairwise=True)
    done = provision(es_client(es_url), ClusterInfo((9, 1, 4), "trial", True), "questions", meta,
                     sidecar_from_es="http://sidecar:8080", token=None, progress=False,
                     source=FromIndex("forum", "question.title", "question.text", None, in_place))
    index = "forum" if in_place else "questions"
    pipeline = f"esrerank-{index}-ingest"
    assert not [p for p in writes(rec) if p.startswith(("/_inference/text_embedding", "/_inference/sparse"))]
    body = sent(rec, "PUT", f"/_ingest/pipeline/{pipeline}")
    conforms(body, "Pipeline")
    kinds = [next(iter(p)) for p in body["processors"]]
    assert kinds == ["script", "html_strip", "script"]  # text, its tags stripped, rerank_text: no inference
    outs = [p["script"]["params"]["out"] for p in body["processors"] if "script" in p]
    assert outs == [mappings.TEXT_FIELD, mappings.RERANK_FIELD]
    assert done.meta.embedding == {"pipeline": pipeline}
    assert done.meta.inference == {"bm25": f"esrerank-{index}-bm25"}
    if in_place:
        added = sent(rec, "PUT", "/forum/_mapping")["properties"]
        assert set(added) == {mappings.TEXT_FIELD, mappings.RERANK_FIELD}
        (ubq,) = [r for r in rec.requests if r["path"] == "/forum/_update_by_query"]
        assert f"pipeline={pipeline}" in ubq["query"]
    else:
        created = sent(rec, "PUT", "/questions")
        assert created["settings"]["default_pipeline"] == pipeline
        assert mappings.VECTOR_FIELD not in created["mappings"]["properties"]
        assert sent(rec, "POST", "/_reindex")["dest"] == {"index": "questions", "pipeline": pipeline}
    text = "\n".join(done.lines)
    assert f"ingest pipeline {pipeline}: text and rerank_text from your fields" in text
    assert "mode native:  ready" in text and "mode hybrid:  unavailable (tiny (cross-encoder)" in text
