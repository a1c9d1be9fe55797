"""The Kibana dashboard's saved objects and ``esrerank kibana import``.

Without Kibana: the checked-in NDJSON is exactly what the code builds; every reference resolves and
every field a Lens column, control or field label reads exists in the results mapping with a type
the operation accepts (and the check does catch a broken object); the import client's requests and
its reports of created / replaced / refused objects, against a local HTTP server that answers like
Kibana's import API (failure injection only). With Docker: a real Kibana 9.5 imports the set.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from docker_available import STACK_VERSION, requires_docker

from es_plugin_bridge.elastic.results_index import RESULTS_MAPPING, mapped_fields
from es_plugin_bridge.kibana.saved_objects import (
    DASHBOARD_ID,
    DATA_VIEW_ID,
    check_saved_objects,
    parse_ndjson,
    saved_objects,
    to_ndjson,
)

ROOT = Path(__file__).resolve().parents[2]
NDJSON = ROOT / "mappings" / "kibana" / "esrerank-dashboard.ndjson"


def test_checked_in_ndjson_is_generated_from_code():
    assert NDJSON.read_text(encoding="utf-8") == to_ndjson(saved_objects("esrerank-runs")), (
        "regenerate: esrerank kibana ndjson --out mappings/kibana/esrerank-dashboard.ndjson")


def test_saved_objects_are_consistent_with_the_results_mapping():
    objects = parse_ndjson(NDJSON.read_text(encoding="utf-8"))
    assert [o["type"] for o in objects] == ["index-pattern", "lens", "lens", "lens", "lens", "dashboard"]
    assert check_saved_objects(objects) == []
    view = objects[0]
    assert view["id"] == DATA_VIEW_ID and view["attributes"]["title"] == "esrerank-runs"
    assert view["attributes"]["timeFieldName"] == "@timestamp"
    assert mapped_fields()["@timestamp"] == "date"
    # Every field a panel reads is in the mapping: the dashboard shows no "field not found".
    read = {c["sourceField"] for o in objects if o["type"] == "lens"
            for layer in o["attributes"]["state"]["datasourceStates"]["formBased"]["layers"].values()
            for c in layer["columns"].values() if c["operationType"] != "count"}
    assert read <= set(mapped_fields())
    assert {"ranker", "outcome_vs_bm25", "disagreement", "query_id", "metrics.map", "metrics.mrr",
            "metrics.acc_at_1"} <= read


def test_dashboard_shows_every_lens_by_reference():
    objects = saved_objects()
    dashboard = objects[-1]
    assert dashboard["id"] == DASHBOARD_ID
    panels = json.loads(dashboard["attributes"]["panelsJSON"])
    lens_ids = {o["id"] for o in objects if o["type"] == "lens"}
    by_ref = {r["name"]: r["id"] for r in dashboard["references"]}
    shown = {by_ref[f"{p['panelIndex']}:{p['panelRefName']}"] for p in panels if "panelRefName" in p}
    assert shown == lens_ids
    # No two panels overlap on the 48-column grid.
    cells = set()
    for p in panels:
        g = p["gridData"]
        assert g["x"] + g["w"] <= 48
        new = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & new, p["panelIndex"]
        cells |= new


@pytest.mark.parametrize("breakage", ["unmapped_field", "wrong_type", "dangling_reference",
                                      "missing_panel_ref", "control_field"])
def test_check_catches_broken_objects(breakage):
    objects = copy.deepcopy(saved_objects())
    lens = objects[1]
    layer = lens["attributes"]["state"]["datasourceStates"]["formBased"]["layers"]["layer1"]
    if breakage == "unmapped_field":
        layer["columns"]["map"]["sourceField"] = "metrics.ndcg"
    elif breakage == "wrong_type":
        layer["columns"]["ranker"]["sourceField"] = "score"
    elif breakage == "dangling_reference":
        lens["references"][0]["id"] = "no-such-data-view"
    elif breakage == "missing_panel_ref":
        objects[-1]["references"] = [r for r in objects[-1]["references"] if r["type"] != "lens"]
    else:
        controls = json.loads(objects[-1]["attributes"]["controlGroupInput"]["panelsJSON"])
        next(iter(controls.values()))["explicitInput"]["fieldName"] = "score"
        objects[-1]["attributes"]["controlGroupInput"]["panelsJSON"] = json.dumps(controls)
    assert check_saved_objects(objects)


def test_check_catches_a_field_dropped_from_the_mapping():
    mapping = copy.deepcopy(RESULTS_MAPPING)
    del mapping["mappings"]["properties"]["outcome_vs_bm25"]
    problems = check_saved_objects(saved_objects(), mapping)
    assert any("outcome_vs_bm25" in p for p in problems)


def test_index_option_names_the_data_view(monkeypatch, cli, tmp_path):
    monkeypatch.setenv("ESRERANK_RESULTS_INDEX", "team-a-runs")
    assert saved_objects()[0]["attributes"]["title"] == "team-a-runs"
    code, _, _ = cli(["kibana", "ndjson", "--index", "other-runs", "--out", str(tmp_path / "o.ndjson")])
    assert code == 0
    assert parse_ndjson((tmp_path / "o.ndjson").read_text())[0]["attributes"]["title"] == "other-runs"


# ---- the import client against a server that answers like Kibana's import API -------------------


class FakeKibana(BaseHTTPRequestHandler):
    """Records requests; answers from ``self.server.answer(objects) -> (status, body)``."""

    def do_POST(self):  # noqa: N802 - http.server's naming
        length = int(self.headers["Content-Length"])
        raw = self.rfile.read(length)
        self.server.requests.append({"path": self.path, "headers": self.headers, "body": raw})
        boundary = self.headers["Content-Type"].split("boundary=")[1].encode()
        part = raw.split(b"--" + boundary)[1]
        ndjson = part.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n", 1)[0].decode()
        status, body = self.server.answer(parse_ndjson(ndjson))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        data = json.dumps({"status": {"overall": {"level": "available"}}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def kibana() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeKibana)
    server.requests = []
    existing: set[tuple[str, str]] = set()

    def answer(objects):  # Kibana's behaviour: replaced objects carry overwrite: true
        results = []
        for o in objects:
            key = (o["type"], o["id"])
            results.append({"type": o["type"], "id": o["id"], "meta": {"title": o["attributes"].get("title")},
                            **({"overwrite": True} if key in existing else {})})
            existing.add(key)
        return 200, {"success": True, "successCount": len(objects), "successResults": results}

    server.answer = answer
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_import_sends_the_ndjson_and_says_created_then_replaced(kibana, cli):
    code, out, err = cli(["kibana", "import", "--kibana-url", _url(kibana), "--api-key", "a2V5",
                          "--wait", "5"])
    assert code == 0, err
    request = kibana.requests[0]
    assert request["path"] == "/api/saved_objects/_import?overwrite=true"
    assert request["headers"]["kbn-xsrf"] == "true"
    assert request["headers"]["Authorization"] == "ApiKey a2V5"
    assert b'name="file"' in request["body"] and to_ndjson(saved_objects()).encode() in request["body"]
    lines = out.splitlines()
    assert sum(line.startswith("created ") for line in lines) == 6
    assert f"created dashboard {DASHBOARD_ID} (esrerank: ranking comparison)" in lines
    assert lines[-1].endswith(f"/app/dashboards#/view/{DASHBOARD_ID}")
    code, out, _ = cli(["kibana", "import", "--kibana-url", _url(kibana), "--username", "elastic",
                        "--password", "pw", "--space", "team"])
    assert code == 0
    assert sum(line.startswith("replaced ") for line in out.splitlines()) == 6
    assert kibana.requests[1]["path"] == "/s/team/api/saved_objects/_import?overwrite=true"
    assert kibana.requests[1]["headers"]["Authorization"] == "Basic ZWxhc3RpYzpwdw=="


def test_import_refusal_is_one_line(kibana, cli):
    def refuse(objects):
        ok = [{"type": o["type"], "id": o["id"], "meta": {"title": "t"}}
              for o in objects if o["type"] != "lens"]
        errors = [{"type": "lens", "id": o["id"], "meta": {"title": "t"},
                   "error": {"type": "missing_references",
                             "references": [{"type": "index-pattern", "id": "esrerank-results"}]}}
                  for o in objects if o["type"] == "lens"]
        return 200, {"success": False, "successCount": len(ok), "successResults": ok, "errors": errors}

    kibana.answer = refuse
    code, out, err = cli(["kibana", "import", "--kibana-url", _url(kibana)])
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: Kibana refused 4 of 6 objects: ")
    assert "lens esrerank-aggregates: missing_references (index-pattern esrerank-results)" in err
    assert "created index-pattern esrerank-results" in out


@pytest.mark.parametrize(("status", "body", "expected"), [
    (401, {"statusCode": 401, "error": "Unauthorized", "message": "Unauthorized"},
     "error: Kibana refused the import (HTTP 401): Unauthorized"),
    (415, {"statusCode": 415, "message": "Unsupported Media Type"}, "(HTTP 415): Unsupported Media Type"),
])
def test_import_http_errors_are_one_line(kibana, cli, status, body, expected):
    kibana.answer = lambda objects: (status, body)
    code, _, err = cli(["kibana", "import", "--kibana-url", _url(kibana)])
    assert code == 2 and err.count("\n") == 1 and expected in err


def test_unreachable_kibana_is_one_line(cli, kibana):
    url = _url(kibana)
    kibana.shutdown()
    kibana.server_close()
    code, _, err = cli(["kibana", "import", "--kibana-url", url])
    assert code == 2 and err.count("\n") == 1 and "is unreachable" in err
    started = time.monotonic()
    code, _, err = cli(["kibana", "import", "--kibana-url", url, "--wait", "1"])
    assert code == 2 and "was not available within 1 s" in err and time.monotonic() - started < 10


def test_user_mistakes(cli, tmp_path):
    code, _, err = cli(["kibana", "import", "--kibana-url", "localhost:5601"])
    assert code == 2 and "must start with http" in err
    code, _, err = cli(["kibana", "import", "--api-key", "k", "--username", "u", "--password", "p"])
    assert code == 2 and "not both" in err
    bad = tmp_path / "bad.ndjson"
    bad.write_text("{not json\n")
    code, _, err = cli(["kibana", "import", "--file", str(bad)])
    assert code == 2 and "line 1: not JSON" in err


# ---- a real Kibana ----------------------------------------------------------------------------------


@requires_docker
@pytest.mark.elasticsearch
@pytest.mark.slow
def test_dashboard_imports_into_kibana(cli):
    from testcontainers.community.elasticsearch import ElasticSearchContainer
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

    es_image = f"docker.elastic.co/elasticsearch/elasticsearch:{STACK_VERSION}"
    with Network() as net, \
            ElasticSearchContainer(es_image, mem_limit="2g") \
            .with_env("xpack.license.self_generated.type", "trial") \
            .with_network(net).with_network_aliases("elasticsearch") as es, \
            DockerContainer(f"docker.elastic.co/kibana/kibana:{STACK_VERSION}") \
            .with_env("ELASTICSEARCH_HOSTS", '["http://elasticsearch:9200"]') \
            .with_network(net).with_exposed_ports(5601) as kibana:
        assert es.get_exposed_port(9200)
        url = f"http://{kibana.get_container_host_ip()}:{kibana.get_exposed_port(5601)}"
        code, out, err = cli(["kibana", "import", "--kibana-url", url, "--wait", "300"])
        assert code == 0, err
        assert sum(line.startswith("created ") for line in out.splitlines()) == 6
        code, out, err = cli(["kibana", "import", "--kibana-url", url])
        assert code == 0 and sum(line.startswith("replaced ") for line in out.splitlines()) == 6, err
        request = urllib.request.Request(f"{url}/api/saved_objects/dashboard/{DASHBOARD_ID}")
        with urllib.request.urlopen(request, timeout=30) as resp:
            dashboard = json.loads(resp.read())
        assert {r["id"] for r in dashboard["references"] if r["type"] == "lens"} == {
            o["id"] for o in saved_objects() if o["type"] == "lens"}
