"""``esrerank es setup / index / search / evaluate`` against a real OpenSearch node and a live sidecar.

The commands read the engine from the cluster (``GET /``) and reach OpenSearch through opensearch-py
(``elastic/cluster/opensearch_client.py``). Modes on OpenSearch: ``rerank`` (OpenSearch calls the sidecar
through the search pipeline ``es setup`` put: the hits come back in the sidecar's order of the first
stage's window, the model's own order, with its scores) and ``bridge`` (this client calls the sidecar
and fuses with β: the in-process ``fused`` ranker's order). ``es evaluate`` gives the in-process
figures, and writes its results index on the node. The vector modes (``vectors``, ``hybrid``,
``hybrid-rrf``) are in ``test_opensearch_vectors.py``.
"""

from __future__ import annotations

import json

import pytest
from es_commands import SEMEVAL_DEV, TOKEN, common, run
from live_sidecar import post, serve

from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic.queries import first_stage_query
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import rerank_text

pytestmark = [pytest.mark.engine, pytest.mark.slow]

INDEX = "es-questions"


@pytest.fixture(scope="module")
def indexed(opensearch, sidecar):
    """es setup + es index of SemEval dev, through the console entry point's own code."""
    url, model = sidecar
    assert run(["es", "setup", str(model), "--index", INDEX, *common(opensearch, url)]) == 0
    assert run(["es", "index", f"semeval:{SEMEVAL_DEV}", "--index", INDEX, "--no-progress",
                *common(opensearch, url)]) == 0
    return url


def test_setup_says_what_runs_on_opensearch(opensearch, sidecar, cli):
    url, model = sidecar
    code, out, err = cli(["es", "setup", str(model), "--index", "setup-lines", *common(opensearch, url)])
    assert code == 0, err
    assert "on OpenSearch 2.19.1" in out and "mode rerank:  ready (search pipeline setup-lines-rerank)" in out
    assert "next: esrerank es index SPEC --index setup-lines" in out
    # The node has no security plugin: the token just stored in its connector is readable (issue 48, 1).
    assert ("warning: OpenSearch 2.19.1 has no security plugin: the sidecar token stored in its ml-commons "
            "connectors is readable by anyone who can reach the node; give this cluster its own token (one "
            "line of the sidecar's --token-file)\n") in out
    meta = opensearch.ok("GET", "/setup-lines/_mapping")["setup-lines"]["mappings"]["_meta"]["esrerank"]
    assert meta["search_pipeline"] == "setup-lines-rerank" and meta["dimension"] == 24  # the tiny BOW-CNN's
    assert "mode native: Elasticsearch only" in out and "mode vectors: ready, two calls" in out
    code, _, err = cli(["es", "setup", str(model), "--index", "setup-lines", *common(opensearch, url)])
    assert code == 2 and "index setup-lines already exists (--recreate deletes it first)" in err


def test_index_reports_counts_and_resumes(indexed, opensearch, cli):
    code, out, err = cli(["es", "index", f"semeval:{SEMEVAL_DEV}", "--index", INDEX, "--resume",
                          "--no-progress", *common(opensearch, indexed)])
    assert code == 0, err
    assert "read 550" in out and "skipped 550" in out
    assert opensearch.ok("GET", f"/{INDEX}/_count")["count"] == 550


def _window(opensearch, query: str, size: int) -> list[dict]:
    tokens = Preprocessor().tokens(question_from_text(query))
    body = {"query": first_stage_query("bm25", tokens), "size": size, "_source": ["rerank_text"]}
    return opensearch.ok("POST", f"/{INDEX}/_search", body)["hits"]["hits"]


@pytest.mark.parametrize("n", [0, 7, 23])
def test_mode_rerank_is_the_sidecars_order_of_the_first_stage_window(indexed, opensearch, cli, n):
    query = read_spec(f"semeval:{SEMEVAL_DEV}").queries[n].query.title
    code, out, err = cli(["es", "search", query, "--mode", "rerank", "--json", "--window", "30",
                          "--index", INDEX, *common(opensearch, indexed)])
    assert code == 0, err
    result = json.loads(out)
    assert result["reranked"] is True and result["fallback_reason"] is None
    window = _window(opensearch, query, 30)
    status, direct = post(f"{indexed}/v1/rerank", {
        "query": rerank_text(question_from_text(query)),
        "documents": [h["_source"]["rerank_text"] for h in window]}, TOKEN)
    assert status == 200, direct
    expected = [(window[r["index"]]["_id"], r["relevance_score"]) for r in direct["results"]][:10]
    got = [(h["id"], h["score"]) for h in result["hits"]]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-6)
    assert {i for i, _ in got} == {i for i, _ in expected}


def test_mode_bridge_reranks_on_opensearch(indexed, opensearch, cli):
    query = read_spec(f"semeval:{SEMEVAL_DEV}").queries[3].query.title
    code, out, err = cli(["es", "search", query, "--mode", "bridge", "--json", "--index", INDEX,
                          *common(opensearch, indexed)])
    assert code == 0, err
    result = json.loads(out)
    assert result["reranked"] is True and len(result["hits"]) == 10
    assert all(h["title"] for h in result["hits"])


def test_esrerank_search_on_the_index_is_es_search_mode_bridge(indexed, opensearch, cli):
    """Two front doors, one search: ``esrerank search --engine opensearch`` gives ``es search --mode
    bridge``'s hits and scores; ``--engine elasticsearch`` on this node is refused in one line, so the
    engine a run names is the one that answered."""
    query = read_spec(f"semeval:{SEMEVAL_DEV}").queries[5].query.title
    answers = []
    for argv in (["es", "search", query, "--mode", "bridge"], ["search", query, "--engine", "opensearch"]):
        code, out, err = cli([*argv, "--json", "--index", INDEX, *common(opensearch, indexed)])
        assert code == 0, err
        answers.append(json.loads(out))
    assert all(answer["reranked"] for answer in answers)
    bridge, search = ([(h["id"], h["score"]) for h in answer["hits"]] for answer in answers)
    assert len(bridge) == 10 and bridge == search
    code, out, err = cli(["search", query, "--engine", "elasticsearch", "--index", INDEX,
                          *common(opensearch, indexed)])
    assert code != 0 and out == ""
    assert err.strip() == (f"error: --engine elasticsearch, but {opensearch.url} answers as OpenSearch "
                           "2.19.1: use --engine opensearch")


def test_elasticsearch_modes_are_refused_in_one_line(indexed, opensearch, cli):
    code, out, err = cli(["es", "search", "visa", "--mode", "native", "--index", INDEX,
                          *common(opensearch, indexed)])
    assert code != 0 and out == ""
    assert err.strip() == ("error: mode native does not run on OpenSearch 2.19.1; its modes: learned-hybrid, "
                           "vectors, bridge, hybrid, hybrid-rrf, rerank")


def test_es_evaluate_bridge_gives_the_in_process_figures_and_writes_the_results_index(
        indexed, opensearch, sidecar, cli, tmp_path):
    _, model = sidecar
    rankers = "bm25,lmdirichlet,fused"
    base = ["--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", rankers,
            "--model", str(model), "--first-stage", "bm25", "--no-progress"]
    code, _, err = cli(["evaluate", *base, "--json", str(tmp_path / "local.json")])
    assert code == 0, err
    code, out, err = cli(["es", "evaluate", *base, "--mode", "bridge", "--json", str(tmp_path / "os.json"),
                          *common(opensearch, indexed)])
    assert code == 0, err
    local = json.loads((tmp_path / "local.json").read_text())["rankers"]
    remote = json.loads((tmp_path / "os.json").read_text())["rankers"]
    for name in rankers.split(","):
        for metric, value in local[name].items():
            assert remote[name][metric] == pytest.approx(value, abs=1.0), (name, metric)
    assert "per-query results in index esrerank-runs" in out
    runs = opensearch.ok("POST", "/esrerank-runs/_search", {"size": 0, "query": {"term": {"mode": "bridge"}}})
    assert runs["hits"]["total"]["value"] >= 3 * 50
    # The run's data set is named by its --data file (it was "data" whatever the file, before).
    named = opensearch.ok("POST", "/esrerank-runs/_search",
                          {"size": 0, "query": {"term": {"dataset": SEMEVAL_DEV.name}}})
    assert named["hits"]["total"]["value"] >= 3 * 50


def test_es_evaluate_rerank_gives_the_in_process_model_figures(indexed, opensearch, sidecar, cli, tmp_path):
    """Mode rerank is the model's own order of the first stage's window: the in-process ``model``."""
    _, model = sidecar
    base = ["--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "bm25,model",
            "--model", str(model), "--first-stage", "bm25", "--no-progress"]
    code, _, err = cli(["evaluate", *base, "--json", str(tmp_path / "local.json")])
    assert code == 0, err
    code, out, err = cli(["es", "evaluate", *base, "--mode", "rerank", "--no-results-index",
                          "--json", str(tmp_path / "os.json"), *common(opensearch, indexed)])
    assert code == 0, err
    local = json.loads((tmp_path / "local.json").read_text())["rankers"]
    remote = json.loads((tmp_path / "os.json").read_text())["rankers"]
    for name in ("bm25", "model"):
        for metric, value in local[name].items():
            assert remote[name][metric] == pytest.approx(value, abs=1.0), (name, metric)
    assert "model = mode rerank over bm25" in out
    # the run's pipeline is gone with it
    pipelines = opensearch.call("GET", "/_search/pipeline")[1]
    assert not [p for p in pipelines if p.startswith("esrerank-eval-")]


def test_mode_rerank_says_when_opensearch_kept_the_first_stage_order(opensearch, exported, cli, tmp_path):
    with serve(exported["bow-cnn"], TOKEN, tmp_path) as url:
        code, _, err = cli(["es", "setup", str(exported["bow-cnn"]), "--index", "gone",
                            *common(opensearch, url)])
        assert code == 0, err
        code, _, err = cli(["es", "index", f"semeval:{SEMEVAL_DEV}", "--index", "gone", "--no-progress",
                            *common(opensearch, url)])
        assert code == 0, err
    code, out, err = cli(["es", "search", "visa for my wife", "--mode", "rerank", "--json", "--index", "gone",
                          *common(opensearch, url)])
    assert code == 0, err
    result = json.loads(out)
    assert result["reranked"] is False and "rerank processor failed" in result["fallback_reason"]
    assert len(result["hits"]) == 10


def test_an_index_set_up_without_vectors_gets_the_text_only_and_refuses_the_vector_modes(
        opensearch, sidecar, cli):
    url, model = sidecar
    code, out, err = cli(["es", "setup", str(model), "--index", "text-only", "--no-vectors",
                          *common(opensearch, url)])
    assert code == 0, err
    for mode in ("vectors", "hybrid", "hybrid-rrf"):
        assert f"mode {mode}: unavailable (the index holds no vectors (--no-vectors))" in out
    assert "vector" not in opensearch.ok("GET", "/text-only/_mapping")["text-only"]["mappings"]["properties"]
    code, out, err = cli(["es", "index", f"semeval:{SEMEVAL_DEV}", "--index", "text-only", "--no-progress",
                          *common(opensearch, url)])
    assert code == 0, err
    said = "index text-only holds no vectors (the index holds no vectors (--no-vectors)): indexing the text"
    assert said in err
    code, out, err = cli(["es", "search", "visa", "--mode", "hybrid", "--index", "text-only",
                          *common(opensearch, url)])
    assert code != 0 and out == ""
    assert err.strip() == ("error: mode hybrid searches the model's vectors; index text-only holds none "
                           "(it was set up with --no-vectors or without a model)")
