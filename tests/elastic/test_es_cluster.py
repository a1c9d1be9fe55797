"""The Elasticsearch plugin against real clusters (testcontainers): skipped, with the reason, without Docker.

A trial-licence Elasticsearch 9.5 and the sidecar image (docker/sidecar.Dockerfile, serving the tiny
exported bow-cnn of tests/conftest.py) share a Docker network, so Elasticsearch reaches the sidecar as
``http://reranker:8080``. On it: ``es setup`` → ``es index`` of the shipped SemEval dev file →
``es search`` in every mode → ``es evaluate`` in every mode, whose figures must be those of
``esrerank evaluate`` in process (same rankers, fused over BM25) up to ties → the sidecar stopped, the
bridge keeps the first-stage order and says why. A basic-licence cluster runs the modes that need no
licence (vectors in two calls, bridge) and refuses native with the licence it needs. The tiny
cross-encoder (a pairwise model: no vectors) gets a text-only index, runs native and bridge, and
``es evaluate --mode native`` gives its in-process ``fused`` figures.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from docker_available import STACK_VERSION, requires_docker

pytestmark = [pytest.mark.elasticsearch, pytest.mark.slow, requires_docker]

ROOT = Path(__file__).resolve().parents[2]
SEMEVAL_DEV = ROOT / "es_plugin_bridge" / "samples" / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
SIMILARITIES = "bm25,lmdirichlet,lmjelinekmercer,dfr,ib,tfidf"
IMAGE = f"docker.elastic.co/elasticsearch/elasticsearch:{STACK_VERSION}"


def _elasticsearch(network, licence: str):
    from testcontainers.community.elasticsearch import ElasticSearchContainer

    container = (
        ElasticSearchContainer(IMAGE, mem_limit="2g")
        .with_env("ES_JAVA_OPTS", "-Xms1g -Xmx1g")
        .with_env("xpack.license.self_generated.type", licence)
        .with_network(network)
    )
    container.start()
    return container, f"http://{container.get_container_host_ip()}:{container.get_exposed_port(9200)}"


@pytest.fixture(scope="module")
def network():
    from testcontainers.core.network import Network

    with Network() as net:
        yield net


def _same_figures(tmp_path: Path, rankers: str) -> None:
    """``es.json`` (computed by Elasticsearch) holds ``local.json``'s figures, each within 1 point."""
    local = json.loads((tmp_path / "local.json").read_text())["rankers"]
    remote = json.loads((tmp_path / "es.json").read_text())["rankers"]
    for name in rankers.split(","):
        for metric, value in local[name].items():
            assert remote[name][metric] == pytest.approx(value, abs=1.0), (name, metric)


def _sidecar_container(network, model: Path, tag: str, alias: str):
    """The sidecar image (``docker/sidecar.Dockerfile``) serving ``model``, which Elasticsearch reaches
    as ``http://ALIAS:8080``: yields (container, URL from here, model)."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.image import DockerImage
    from testcontainers.core.wait_strategies import HttpWaitStrategy

    with DockerImage(path=str(ROOT), dockerfile_path="docker/sidecar.Dockerfile", tag=tag) as image:
        container = (
            DockerContainer(str(image), _wait_strategy=HttpWaitStrategy(8080, "/readyz"))
            .with_volume_mapping(str(model), "/model", "ro")
            .with_exposed_ports(8080)
            .with_network(network)
            .with_network_aliases(alias)
        )
        container.start()
        url = f"http://{container.get_container_host_ip()}:{container.get_exposed_port(8080)}"
        yield container, url, model
        container.stop()


@pytest.fixture(scope="module")
def sidecar(network, exported):
    yield from _sidecar_container(network, exported["bow-cnn"], "esrerank-sidecar:test", "reranker")


@pytest.fixture(scope="module")
def trial(network):
    container, url = _elasticsearch(network, "trial")
    yield url
    container.stop()


@pytest.fixture(scope="module")
def basic(network):
    container, url = _elasticsearch(network, "basic")
    yield url
    container.stop()


def _common(es_url: str, sidecar_url: str) -> list[str]:
    return ["--es-url", es_url, "--sidecar", sidecar_url]


@pytest.fixture(scope="module")
def trial_index(trial, sidecar):
    """setup + index on the trial cluster (module scope: one index for the search tests)."""
    from es_plugin_bridge.cli.main import main

    _, sidecar_url, model = sidecar

    def run(argv):
        try:
            main(argv)
        except SystemExit as exc:
            return exc.code
        return 0

    assert (
        run(
            [
                "es",
                "setup",
                str(model),
                "--index",
                "questions",
                "--sidecar-from-es",
                "http://reranker:8080",
                *_common(trial, sidecar_url),
            ]
        )
        == 0
    )
    assert (
        run(
            [
                "es",
                "index",
                f"semeval:{SEMEVAL_DEV}",
                "--index",
                "questions",
                "--no-progress",
                *_common(trial, sidecar_url),
            ]
        )
        == 0
    )
    return trial, sidecar_url, model


def test_setup_and_index_report_counts(trial, sidecar, cli):
    _, sidecar_url, model = sidecar
    code, out, err = cli(
        [
            "es",
            "setup",
            str(model),
            "--index",
            "counts",
            "--sidecar-from-es",
            "http://reranker:8080",
            *_common(trial, sidecar_url),
        ]
    )
    assert code == 0, err
    assert "registered inference endpoint esrerank-counts-bm25" in out and "mode native:  ready" in out
    code, out, err = cli(
        [
            "es",
            "index",
            f"semeval:{SEMEVAL_DEV}",
            "--index",
            "counts",
            "--no-progress",
            *_common(trial, sidecar_url),
        ]
    )
    assert code == 0, err
    assert "read 550" in out and "indexed 550" in out and "failed 0" in out
    code, out, err = cli(
        [
            "es",
            "index",
            f"semeval:{SEMEVAL_DEV}",
            "--index",
            "counts",
            "--resume",
            "--no-progress",
            *_common(trial, sidecar_url),
        ]
    )
    assert code == 0 and "skipped 550" in out, (out, err)


@pytest.mark.parametrize("mode", ["native", "vectors", "bridge"])
def test_search_reranks_in_every_mode(trial_index, mode, cli):
    es_url, sidecar_url, _ = trial_index
    code, out, err = cli(
        [
            "es",
            "search",
            "where can I buy baby clothes in Doha",
            "--mode",
            mode,
            "--json",
            "--index",
            "questions",
            *_common(es_url, sidecar_url),
        ]
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["reranked"] is True and len(result["hits"]) == 10


@pytest.mark.parametrize("mode", ["native", "vectors", "bridge"])
def test_es_evaluate_matches_in_process_evaluate(trial, sidecar, mode, cli, tmp_path):
    _, sidecar_url, model = sidecar
    rankers = f"{SIMILARITIES},fused"
    code, _, err = cli(
        [
            "evaluate",
            "--task",
            "rerank",
            "--data",
            f"semeval:{SEMEVAL_DEV}",
            "--rankers",
            rankers,
            "--model",
            str(model),
            "--first-stage",
            "bm25",
            "--no-progress",
            "--json",
            str(tmp_path / "local.json"),
        ]
    )
    assert code == 0, err
    code, out, err = cli(
        [
            "es",
            "evaluate",
            "--task",
            "rerank",
            "--data",
            f"semeval:{SEMEVAL_DEV}",
            "--rankers",
            rankers,
            "--model",
            str(model),
            "--mode",
            mode,
            "--no-progress",
            "--sidecar-from-es",
            "http://reranker:8080",
            "--json",
            str(tmp_path / "es.json"),
            *_common(trial, sidecar_url),
        ]
    )
    assert code == 0, err
    # same figures up to ties (and the rank_features truncation for fused in mode vectors)
    _same_figures(tmp_path, rankers)
    assert "per-query results in index esrerank-runs" in out


def test_bridge_falls_back_when_the_sidecar_is_down(trial_index, sidecar, cli):
    es_url, sidecar_url, _ = trial_index
    container = sidecar[0]
    container.get_wrapped_container().stop()
    try:
        code, out, err = cli(
            [
                "es",
                "search",
                "baby clothes Doha",
                "--mode",
                "bridge",
                "--json",
                "--index",
                "questions",
                *_common(es_url, sidecar_url),
            ]
        )
        assert code == 0, err
        result = json.loads(out)
        assert result["reranked"] is False and result["fallback_reason"] and len(result["hits"]) == 10
    finally:
        container.get_wrapped_container().start()


def test_basic_licence_runs_vectors_and_bridge_and_refuses_native(basic, sidecar, cli, tmp_path):
    _, sidecar_url, model = sidecar
    code, out, err = cli(["es", "setup", str(model), "--index", "questions", *_common(basic, sidecar_url)])
    assert code == 0, err
    assert "mode native:  unavailable" in out and "two calls" in out
    code, out, err = cli(
        [
            "es",
            "index",
            f"semeval:{SEMEVAL_DEV}",
            "--index",
            "questions",
            "--no-progress",
            *_common(basic, sidecar_url),
        ]
    )
    assert code == 0, err
    for mode in ("vectors", "bridge", "hybrid", "hybrid-rrf"):  # hybrid-rrf: fused by the client
        code, out, err = cli(
            [
                "es",
                "search",
                "baby clothes Doha",
                "--mode",
                mode,
                "--json",
                "--index",
                "questions",
                *_common(basic, sidecar_url),
            ]
        )
        assert code == 0 and json.loads(out)["reranked"] is True, (mode, err)
    code, out, err = cli(
        [
            "es",
            "search",
            "baby clothes Doha",
            "--mode",
            "native",
            "--index",
            "questions",
            *_common(basic, sidecar_url),
        ]
    )
    assert code == 2 and "enterprise or trial licence" in err


# --- modes hybrid and hybrid-rrf (es_plugin_bridge/elastic/modes/hybrid.py) ------------------------------

VAL_PAIRS = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"


@pytest.mark.parametrize("knn", ["exact", "hnsw"])
@pytest.mark.parametrize("mode", ["hybrid", "hybrid-rrf"])
def test_search_hybrid_modes(trial_index, mode, knn, cli):
    """``_msearch`` + a named-score search (hybrid), or the ``rrf`` retriever (hybrid-rrf on trial)."""
    es_url, sidecar_url, _ = trial_index
    code, out, err = cli(
        ["es", "search", "where can I buy baby clothes in Doha", "--mode", mode, "--knn", knn, "--json",
         "--explain", "--index", "questions", *_common(es_url, sidecar_url)]
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["reranked"] is True and len(result["hits"]) == 10
    if mode == "hybrid":
        assert set(result["request"]) == {"msearch", "search"}
        assert len(result["request"]["msearch"]) == 4 and result["request"]["search"]["size"] >= 10
    else:
        assert "rrf" in result["request"]["retriever"]
    scores = [hit["score"] for hit in result["hits"]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("mode", ["hybrid", "hybrid-rrf"])
def test_es_evaluate_hybrid_matches_in_process_evaluate(trial, sidecar, mode, cli, tmp_path):
    """Retrieval over AskUbuntu val titles: the in-process ranker and the mode of that name, exact knn."""
    _, sidecar_url, model = sidecar
    task = ["--task", "retrieval", "--queries", f"pairs:{VAL_PAIRS}", "--max-queries", "100",
            "--rankers", f"bm25,{mode}", "--model", str(model), "--no-progress"]
    code, _, err = cli(["evaluate", *task, "--json", str(tmp_path / "local.json")])
    assert code == 0, err
    code, out, err = cli(["es", "evaluate", *task, "--mode", mode, "--knn", "exact", "--json",
                          str(tmp_path / "es.json"), *_common(trial, sidecar_url)])
    assert code == 0, err
    local = json.loads((tmp_path / "local.json").read_text())["rankers"]
    remote = json.loads((tmp_path / "es.json").read_text())["rankers"]
    for name in ("bm25", mode):
        for metric, value in local[name].items():
            # the same figures up to ties (RRF ties go to the smaller doc id in Elasticsearch) and the
            # rank_features truncation in hybrid's BOW term
            assert remote[name][metric] == pytest.approx(value, abs=1.0), (name, metric)
    assert f"{mode} = mode {mode} over bm25" in out


@pytest.fixture(scope="module")
def pair_sidecar(network, pair_model):
    """The sidecar image serving the tiny exported cross-encoder (``tests/tiny_models.py``), which
    Elasticsearch reaches as ``http://pair-reranker:8080``."""
    yield from _sidecar_container(network, pair_model[1], "esrerank-sidecar:test-pair", "pair-reranker")


def test_cross_encoder_runs_native_and_bridge_and_refuses_the_vector_modes(trial, pair_sidecar, cli,
                                                                           tmp_path):
    """A pairwise model end to end: ``es setup`` makes a text-only index and the native endpoints (the
    token checked on ``/v1/rerank``), ``es index`` sends no ``/v1/encode``, Elasticsearch's
    ``text_similarity_reranker`` calls the cross-encoder in mode native, the bridge reranks, the modes
    that need vectors are refused in one line, and ``es evaluate --mode native`` gives the in-process
    ``fused`` figures."""
    _, sidecar_url, model = pair_sidecar
    common = _common(trial, sidecar_url)
    code, out, err = cli(["es", "setup", str(model), "--index", "pairs", "--sidecar-from-es",
                          "http://pair-reranker:8080", *common])
    assert code == 0, err
    assert "registered inference endpoint esrerank-pairs-bm25" in out and "mode native:  ready" in out
    assert "mode vectors: unavailable" in out and "no vector per text" in out
    code, out, err = cli(["es", "index", f"semeval:{SEMEVAL_DEV}", "--index", "pairs", "--no-progress",
                          *common])
    assert code == 0, err
    assert "indexed 550" in out and "failed 0" in out and "indexing the text only" in err
    for mode in ("native", "bridge"):
        code, out, err = cli(["es", "search", "where can I buy baby clothes in Doha", "--mode", mode,
                              "--json", "--timeout", "30", "--index", "pairs", *common])
        assert code == 0, err
        result = json.loads(out)
        assert result["reranked"] is True and len(result["hits"]) == 10, (mode, result)
    for mode in ("vectors", "hybrid", "hybrid-rrf"):
        code, out, err = cli(["es", "search", "baby clothes", "--mode", mode, "--index", "pairs", *common])
        assert code != 0 and "has no vectors: use --mode native or --mode bridge" in err, (mode, err)
    rankers = "bm25,fused"
    data = f"semeval:{SEMEVAL_DEV}"
    code, _, err = cli(["evaluate", "--task", "rerank", "--data", data, "--rankers", rankers,
                        "--model", str(model), "--first-stage", "bm25", "--no-progress",
                        "--json", str(tmp_path / "local.json")])
    assert code == 0, err
    code, _, err = cli(["es", "evaluate", "--task", "rerank", "--data", data, "--rankers", rankers,
                        "--model", str(model), "--mode", "native", "--no-progress", "--sidecar-from-es",
                        "http://pair-reranker:8080", "--json", str(tmp_path / "es.json"), *common])
    assert code == 0, err
    _same_figures(tmp_path, rankers)
