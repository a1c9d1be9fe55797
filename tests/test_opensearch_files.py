"""OpenSearch with the same sidecar: mappings/opensearch/ (connector, model, search pipeline, cluster
settings, index, query) and its apply.py.

Without OpenSearch: every file renders to valid JSON; the trusted-endpoint regex matches the
connector's URL and nothing else; the connector's request body, filled the way ml-commons'
``connector.pre_process.cohere.rerank`` fills it, is accepted unchanged by the real sidecar app (a tiny
exported model) and answers one float score per document, as ``connector.post_process.cohere.rerank``
needs; the pipeline and query read only fields the index maps. With Docker: an OpenSearch container
reranks through a sidecar container built from docker/sidecar.Dockerfile.
"""

from __future__ import annotations

import importlib.util
import json
import re
import urllib.request
from pathlib import Path

import pytest
from docker_available import OPENSEARCH_VERSION, requires_docker

from es_plugin_bridge.data.spec import read_spec

ROOT = Path(__file__).resolve().parents[1]
OPENSEARCH = ROOT / "mappings" / "opensearch"
SEMEVAL = ROOT / "es_plugin_bridge" / "samples" / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TOKEN = "t0ken"


def _load_apply():
    spec = importlib.util.spec_from_file_location("opensearch_apply", OPENSEARCH / "apply.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


apply = _load_apply()
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
    assert url == "http://sidecar:8080/v1/rerank"
    assert re.fullmatch(regex, url)
    for other in ("http://sidecar:8080/v1/embed", "http://sidecar:8080/v1/rerank/x", "http://evil/v1/rerank",
                  "http://sidecarX8080/v1/rerank"):
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


def _fill_like_ml_commons(template: str, query: str, documents: list[str]) -> str:
    """What ml-commons sends: cohere.rerank's pre-process sets query (a string, escaped into the quoted
    slot), documents (a JSON array) and top_n (the number of documents)."""
    parameters = {"query": json.dumps(query)[1:-1], "documents": json.dumps(documents),
                  "top_n": str(len(documents))}
    return re.sub(r"\$\{parameters\.(\w+)\}", lambda m: parameters[m.group(1)], template)


def test_the_sidecar_accepts_the_connector_request_unchanged(exported):
    from es_plugin_bridge.serving.app import create_app

    app = create_app(exported["bow-cnn"], token=TOKEN).test_client()
    template = apply.render("connector.json", **VALUES)["actions"][0]["request_body"]
    query = read_spec(f"semeval:{SEMEVAL}").queries[0]
    documents = [q.title for q in query.candidates]
    body = _fill_like_ml_commons(template, 'what "exactly" is ' + query.query.title, documents)
    answer = app.post("/v1/rerank", data=body, headers={"Authorization": f"Bearer {TOKEN}",
                                                       "Content-Type": "application/json"})
    assert answer.status_code == 200, answer.get_json()
    results = answer.get_json()["results"]
    # The post-process reads one result per document (by index) with a float relevance_score.
    assert sorted(r["index"] for r in results) == list(range(len(documents)))
    assert all(isinstance(r["relevance_score"], float) for r in results)
    assert all(0.0 <= r["relevance_score"] <= 1.0 for r in results)


def test_apply_reports_an_unreachable_cluster_in_one_line(capsys):
    code = apply.main(["--opensearch-url", "http://127.0.0.1:9", "--sidecar-url", "http://sidecar:8080"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "unreachable" in err


def test_readme_walks_through_the_same_files():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## OpenSearch", 1)[1].split("\n## ", 1)[0]
    assert "2.15" in section
    for name in ("cluster-settings.json", "connector.json", "model.json", "search-pipeline.json", "apply.py"):
        assert name in section, name


# ---- a real OpenSearch ------------------------------------------------------------------------------


@requires_docker
@pytest.mark.elasticsearch
@pytest.mark.slow
def test_opensearch_reranks_through_the_sidecar(exported):
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.image import DockerImage
    from testcontainers.core.network import Network
    from testcontainers.core.wait_strategies import HttpWaitStrategy

    dockerfile = "docker/sidecar.Dockerfile"
    with DockerImage(path=str(ROOT), dockerfile_path=dockerfile, target="sidecar") as image, \
            Network() as net, \
            DockerContainer(str(image)).with_env("ESRERANK_TOKEN", TOKEN) \
            .with_volume_mapping(str(exported["bow-cnn"]), "/model", "ro") \
            .with_network(net).with_network_aliases("sidecar").with_exposed_ports(8080) \
            .waiting_for(HttpWaitStrategy(8080, "/readyz").with_startup_timeout(120)) as sidecar, \
            DockerContainer(f"opensearchproject/opensearch:{OPENSEARCH_VERSION}") \
            .with_env("discovery.type", "single-node").with_env("DISABLE_SECURITY_PLUGIN", "true") \
            .with_env("DISABLE_INSTALL_DEMO_CONFIG", "true") \
            .with_env("OPENSEARCH_JAVA_OPTS", "-Xms1g -Xmx1g") \
            .with_network(net).with_exposed_ports(9200) \
            .waiting_for(HttpWaitStrategy(9200, "/_cluster/health").with_startup_timeout(240)) as node:
        cluster = apply.OpenSearch(f"http://{node.get_container_host_ip()}:{node.get_exposed_port(9200)}")
        apply.configure(cluster, "http://sidecar:8080", TOKEN)
        assert apply.index_semeval(cluster, str(SEMEVAL)) > 100
        query = read_spec(f"semeval:{SEMEVAL}").queries[0].query.title
        hits = apply.search(cluster, query)
        assert hits
        # The scores are the sidecar's own: ask it directly for the same titles.
        sidecar_url = f"http://{sidecar.get_container_host_ip()}:{sidecar.get_exposed_port(8080)}"
        request = urllib.request.Request(
            f"{sidecar_url}/v1/rerank", method="POST",
            data=json.dumps({"query": query, "documents": [h["_source"]["title"] for h in hits]}).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as resp:
            direct = {r["index"]: r["relevance_score"] for r in json.loads(resp.read())["results"]}
        assert [h["_score"] for h in hits] == pytest.approx([direct[i] for i in range(len(hits))], abs=1e-5)
        assert [h["_score"] for h in hits] == sorted((h["_score"] for h in hits), reverse=True)
