"""OpenSearch with the same sidecar: mappings/opensearch/ (connector, model, search pipeline, cluster
settings, index, query) and its apply.py.

Without OpenSearch: every file renders to valid JSON; the trusted-endpoint regex matches the
connector's URL and nothing else; the connector's request body, filled the way ml-commons'
``connector.pre_process.cohere.rerank`` fills it, is accepted unchanged by the real sidecar app (a tiny
exported model) and answers one float score per document, as ``connector.post_process.cohere.rerank``
needs; the pipeline sends one field holding title and body (``rerank_text``, as Elasticsearch's native
mode) and reads only fields the index maps; apply.py waits for ``model_state: DEPLOYED``; the two
ml-commons limits docs/opensearch.md states hold as restated here from ml-commons' source. The parser
ml-commons reads the answers with is run for real in tests/serving/test_opensearch_parser.py. On a real
OpenSearch node and a live sidecar: tests/opensearch/test_opensearch_rerank.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from opensearch_apply import apply

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.text.sidecar_text import rerank_text

ROOT = Path(__file__).resolve().parents[2]
OPENSEARCH = ROOT / "mappings" / "opensearch"
SEMEVAL = ROOT / "es_plugin_bridge" / "samples" / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TOKEN = "t0ken"


VALUES = {"SIDECAR_RERANK_URL_REGEX": apply.trusted_url_regex("http://sidecar:8080"),
          "SIDECAR_URL": "http://sidecar:8080", "SIDECAR_TOKEN": TOKEN, "CONNECTOR_ID": "c1",
          "MODEL_ID": "m1", "QUERY": 'a "quoted" query'}


def test_every_file_renders_and_uses_only_known_placeholders():
    files = sorted(p.name for p in OPENSEARCH.glob("*.json"))
    assert files == ["cluster-settings.json", "connector.json", "index.json", "model.json", "query.json",
                     "search-pipeline.json"]
    for name in files:
        assert isinstance(apply.render(name, **VALUES), dict)
        placeholders = set(re.findall(r"\{\{([A-Z_]+)\}\}", (OPENSEARCH / name).read_text()))
        assert placeholders <= set(VALUES), name
    with pytest.raises(KeyError, match="MODEL_ID"):
        apply.render("search-pipeline.json")
    rerank = apply.render("query.json", **VALUES)["ext"]["rerank"]
    assert rerank["query_context"]["query_text"] == VALUES["QUERY"]


def test_cluster_settings_trust_exactly_the_sidecar():
    settings = apply.render("cluster-settings.json", **VALUES)["persistent"]
    assert settings["plugins.ml_commons.connector.private_ip_enabled"] is True
    (regex,) = settings["plugins.ml_commons.trusted_connector_endpoints_regex"]
    url = apply.render("connector.json", **VALUES)["actions"][0]["url"]
    assert url == "http://sidecar:8080/v1/rerank?all_unscored=refuse"  # serving/schemas.py RerankParams
    assert re.fullmatch(regex, url)
    for other in ("http://sidecar:8080/v1/encode", "http://sidecar:8080/v1/rerank/x", "http://evil/v1/rerank",
                  "http://sidecarX8080/v1/rerank", "http://sidecar:8080/v1/rerank?all_unscoredXrefuse"):
        assert not re.fullmatch(regex, other), other


def test_connector_and_pipeline_shapes():
    connector = apply.render("connector.json", **VALUES)
    action = connector["actions"][0]
    assert connector["protocol"] == "http"
    assert action["action_type"] == "predict" and action["method"] == "POST"
    assert action["pre_process_function"] == "connector.pre_process.cohere.rerank"
    assert action["post_process_function"] == "connector.post_process.cohere.rerank"
    assert action["headers"]["Authorization"] == "Bearer ${credential.api_key}"
    assert connector["credential"]["api_key"] == TOKEN
    model = apply.render("model.json", **VALUES)
    assert model["function_name"] == "remote" and model["connector_id"] == "c1"
    (processor,) = apply.render("search-pipeline.json", **VALUES)["response_processors"]
    assert processor["rerank"]["ml_opensearch"]["model_id"] == "m1"
    mapped = set(apply.render("index.json")["mappings"]["properties"])
    assert set(processor["rerank"]["context"]["document_fields"]) <= mapped
    query = apply.render("query.json", **VALUES)["query"]["multi_match"]
    assert {f.split("^")[0] for f in query["fields"]} <= mapped


def test_the_rerank_context_is_one_field_holding_title_and_body():
    """neural-search's ``DocumentContextSourceFetcher.fetchContext`` (src/main/java/org/opensearch/
    neuralsearch/processor/rerank/context/DocumentContextSourceFetcher.java) appends the listed fields of
    a hit with no separator, and ``""`` for a field the hit lacks: so one field, written at index time
    as Elasticsearch's native mode writes it (``rerank_text``: title, then the HTML body)."""

    (processor,) = apply.render("search-pipeline.json", **VALUES)["response_processors"]
    assert processor["rerank"]["context"]["document_fields"] == [apply.RERANK_FIELD] == ["rerank_text"]
    field = apply.render("index.json")["mappings"]["properties"]["rerank_text"]
    assert field == {"type": "text", "index": False}  # read from _source, never searched
    questions = [q for rq in read_spec(f"semeval:{SEMEVAL}").queries for q in rq.candidates]
    with_body = [q for q in questions if q.body.strip()]
    assert len(with_body) > 100
    for q in questions:
        doc = apply.question_document(q)
        assert doc["rerank_text"] == rerank_text(q) and doc["title"] == q.title
    assert all(q.body.strip()[:20] in apply.question_document(q)["rerank_text"] for q in with_body[:50])


def _is_json_like_ml_commons(value: str) -> bool:
    """``StringUtils.isJson`` (common/src/main/java/org/opensearch/ml/common/utils/StringUtils.java):
    a JSON object or array (org.json's ``JSONObject``/``JSONArray``, then gson). Strict JSON here;
    org.json is more lenient (single quotes, bare keys), which only makes more queries go unescaped."""
    try:
        return isinstance(json.loads(value), (dict, list))
    except ValueError:
        return False


def _fill_like_ml_commons(template: str, query: str, documents: list[str]) -> str:
    """What ml-commons sends. ``CohereRerankPreProcessFunction.process`` sets ``query`` (the string),
    ``documents`` (gson's JSON array) and ``top_n`` (the number of documents);
    ``ConnectorUtils.escapeRemoteInferenceInputData`` (ml-algorithms/src/main/java/org/opensearch/ml/
    engine/algorithms/remote/ConnectorUtils.java) JSON-escapes each value unless it already is JSON
    (``StringUtils.isJson``): so a query that is a JSON object or array goes in unescaped; then
    ``HttpConnector.createPayload`` substitutes ``${parameters.*}`` into the request body."""
    parameters = {"query": query, "documents": json.dumps(documents), "top_n": str(len(documents))}
    parameters = {k: v if _is_json_like_ml_commons(v) else json.dumps(v)[1:-1] for k, v in parameters.items()}
    return re.sub(r"\$\{parameters\.(\w+)\}", lambda m: parameters[m.group(1)], template)


def _payload_is_valid(payload: str) -> bool:
    """``HttpConnector.createPayload``: "Invalid payload: ..." unless the filled body is JSON."""
    try:
        json.loads(payload)
        return True
    except ValueError:
        return False


def test_limit_a_json_object_query_with_quotes_is_an_invalid_payload(exported):
    """ml-commons limit 1 (docs/opensearch.md): restated from ConnectorUtils.escapeRemoteInferenceInputData,
    StringUtils.isJson and HttpConnector.createPayload (ml-commons 2.19 to 3.x). What a user can do:
    replace the query's double quotes by single quotes (or drop them); the sidecar's text pipeline drops
    quotes, so the scores are the same as the original query's."""
    from es_plugin_bridge.serving.app import create_app

    template = apply.render("connector.json", **VALUES)["actions"][0]["request_body"]
    documents = [q.title for q in read_spec(f"semeval:{SEMEVAL}").queries[0].candidates]
    for query in ('{"error": "apt-get install failed"}', '["grub", "dual boot"]'):
        assert not _payload_is_valid(_fill_like_ml_commons(template, query, documents))  # "Invalid payload"
    # Escaped (not JSON), or JSON without a quote: valid.
    for query in ("[1, 2]", '"quoted" words', "{not json}", "a \\ backslash"):
        assert _payload_is_valid(_fill_like_ml_commons(template, query, documents)), query
    app = create_app(exported["bow-cnn"], token=TOKEN).test_client()
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    original = '{"error": "apt-get install failed"}'
    workaround = original.replace('"', "'")
    payload = _fill_like_ml_commons(template, workaround, documents)
    assert _payload_is_valid(payload)
    through = app.post("/v1/rerank", data=payload, headers=auth)
    direct = app.post("/v1/rerank", json={"query": original, "documents": documents}, headers=auth)
    assert through.status_code == direct.status_code == 200
    assert through.get_json()["results"] == direct.get_json()["results"]


def test_limit_a_page_beyond_the_last_hit_fails_inside_ml_commons(exported):
    """ml-commons limit 2 (docs/opensearch.md): neural-search's ``MLOpenSearchRerankProcessor.
    rescoreSearchResponse`` sends the (empty) list of contexts of a page with no hits, and ml-commons'
    ``TextSimilarityInputDataSet`` constructor (common/src/main/java/org/opensearch/ml/common/dataset/
    TextSimilarityInputDataSet.java) throws "No text documents were provided" for an empty list, before
    any connector is called. The sidecar refuses an empty list too (one score per document of nothing
    is no answer); what a user can do: not ask for a page past ``hits.total`` (or search such a page
    without ``search_pipeline``)."""
    from es_plugin_bridge.serving.app import create_app

    app = create_app(exported["bow-cnn"], token=TOKEN).test_client()
    resp = app.post("/v1/rerank", json={"query": "q", "documents": []},
                    headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 400 and resp.get_json()["field"] == "documents"
    section = (ROOT / "docs" / "opensearch.md").read_text(encoding="utf-8")
    assert "No text documents were provided" in section and "Invalid payload" in section


def test_the_sidecar_accepts_the_connector_request_unchanged(exported):
    from es_plugin_bridge.serving.app import create_app

    app = create_app(exported["bow-cnn"], token=TOKEN).test_client()
    template = apply.render("connector.json", **VALUES)["actions"][0]["request_body"]
    query = read_spec(f"semeval:{SEMEVAL}").queries[0]
    documents = [apply.question_document(q)["rerank_text"] for q in query.candidates]  # title and body
    body = _fill_like_ml_commons(template, 'what "exactly" is ' + query.query.title, documents)
    answer = app.post("/v1/rerank", data=body, headers={"Authorization": f"Bearer {TOKEN}",
                                                       "Content-Type": "application/json"})
    assert answer.status_code == 200, answer.get_json()
    results = answer.get_json()["results"]
    # The post-process reads one result per document (by index) with a float relevance_score.
    assert sorted(r["index"] for r in results) == list(range(len(documents)))
    assert all(isinstance(r["relevance_score"], float) for r in results)
    assert all(0.0 <= r["relevance_score"] <= 1.0 for r in results)


class _FakeOpenSearch:
    """Answers apply.py's calls from a script: the register task, then the model's states in turn."""

    def __init__(self, states: list[str | None]) -> None:
        self.states, self.calls = list(states), []

    def call(self, method: str, path: str, body=None) -> dict:
        self.calls.append(f"{method} {path}")
        if path == "/_plugins/_ml/connectors/_create":
            return {"connector_id": "c1"}
        if path.startswith("/_plugins/_ml/models/_register"):
            return {"task_id": "t1", "status": "CREATED"}
        if path == "/_plugins/_ml/tasks/t1":
            return {"state": "COMPLETED", "model_id": "m1"}  # the model document is indexed, no more
        if path == "/_plugins/_ml/models/m1":
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            return {"model_state": state} if state else {}
        return {"acknowledged": True}


def test_apply_waits_for_the_model_to_be_deployed(monkeypatch, capsys):
    """The register task is COMPLETED once ml-commons has indexed the model document
    (``MLModelManager.indexRemoteModel``, plugin/src/main/java/org/opensearch/ml/model/MLModelManager.java,
    which then calls ``deployModelAfterRegistering``); the model serves only at ``model_state: DEPLOYED``
    (common/src/main/java/org/opensearch/ml/common/model/MLModelState.java)."""
    monkeypatch.setattr(apply.time, "sleep", lambda _: None)
    cluster = _FakeOpenSearch(["REGISTERED", "DEPLOYING", "DEPLOYING", "DEPLOYED"])
    assert apply.configure(cluster, "http://sidecar:8080", TOKEN) == "m1"
    models = [i for i, c in enumerate(cluster.calls) if c == "GET /_plugins/_ml/models/m1"]
    assert len(models) == 4
    assert cluster.calls.index("GET /_plugins/_ml/tasks/t1") < models[0]
    assert max(models) < cluster.calls.index(f"PUT /_search/pipeline/{apply.PIPELINE}")
    assert "model m1 deployed" in capsys.readouterr().out


@pytest.mark.parametrize(("states", "says"), [
    (["DEPLOYING", "DEPLOY_FAILED"], "DEPLOY_FAILED"),
    (["DEPLOYING"], "not deployed in time: model_state is DEPLOYING"),
])
def test_apply_says_in_one_line_when_the_model_does_not_deploy(monkeypatch, capsys, states, says):
    clock = iter(range(0, 10_000, 7))
    monkeypatch.setattr(apply.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(apply.time, "sleep", lambda _: None)
    monkeypatch.setattr(apply, "OpenSearch", lambda url: _FakeOpenSearch(states))
    code = apply.main(["--opensearch-url", "http://os:9200", "--sidecar-url", "http://sidecar:8080"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and says in err and "m1" in err, err
    assert "PUT /_search/pipeline" not in err


def test_apply_reports_an_unreachable_cluster_in_one_line(capsys):
    code = apply.main(["--opensearch-url", "http://127.0.0.1:9", "--sidecar-url", "http://sidecar:8080"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "unreachable" in err


def test_the_docs_walk_through_the_same_files():
    section = (ROOT / "docs" / "opensearch.md").read_text(encoding="utf-8")
    assert "2.15" in section
    for name in ("cluster-settings.json", "connector.json", "model.json", "search-pipeline.json", "apply.py"):
        assert name in section, name


def test_es_setup_sends_the_bodies_apply_sends():
    """``es setup`` on OpenSearch (``elastic/modes/rerank.py``) and apply.py send the same
    connector, pipeline and trusted-URL pattern: the files here are the one description of them."""
    from es_plugin_bridge.elastic import opensearch_ml
    from es_plugin_bridge.elastic.modes import rerank as opensearch_rerank

    url = "http://sidecar:8080"
    assert opensearch_rerank.connector_body(url, TOKEN) == apply.render("connector.json", SIDECAR_URL=url,
                                                                         SIDECAR_TOKEN=TOKEN)
    assert opensearch_rerank.pipeline_body("m1") == apply.render("search-pipeline.json", MODEL_ID="m1")
    assert opensearch_rerank.trusted_url_regex(url) == apply.trusted_url_regex(url)
    settings = apply.render("cluster-settings.json", SIDECAR_RERANK_URL_REGEX="x")["persistent"]
    assert opensearch_ml.TRUSTED in settings
