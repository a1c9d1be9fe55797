"""Elasticsearch embeds, a user's own index and text holding ``${`` against a real trial cluster
(testcontainers; skipped, with the reason, without Docker). The fixtures are those of
``tests/elastic/test_es_cluster.py`` (Elasticsearch reaches the sidecar as ``http://reranker:8080``).

- ``es setup`` registers the two embedding endpoints and the ingest pipeline; ``es index`` of the
  AskUbuntu sample goes through it: every document gets ``rerank_text`` without ``${``, a vector and
  ``rank_features``; the bulk file of ``es index --dry-run`` sent with a plain ``_bulk`` gets the same.
- ``_reindex`` from a plain index with other field names (``es setup --from-index``), and the same
  index extended in place; hybrid search on both.
- Mode native with ``${`` in the query and in the documents; with the sidecar stopped, the search
  fails without ``--allow-rerank-failures`` and answers in first-stage order with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from docker_available import requires_docker
from test_es_cluster import _common, network, sidecar, trial  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.elasticsearch, pytest.mark.slow, requires_docker]

ROOT = Path(__file__).resolve().parents[2]
VAL = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"


def _es(url: str):
    from elasticsearch import Elasticsearch

    return Elasticsearch(url, request_timeout=120)


@pytest.fixture(scope="module")
def piped(trial, sidecar, tmp_path_factory):  # noqa: F811
    """``es setup`` + ``es index`` of the AskUbuntu sample, through the ingest pipeline."""
    from es_plugin_bridge.cli.main import main

    _, sidecar_url, model = sidecar
    common = [*_common(trial, sidecar_url)]
    for argv in (
        [
            "es",
            "setup",
            str(model),
            "--index",
            "askubuntu",
            "--sidecar-from-es",
            "http://reranker:8080",
            *common,
        ],
        ["es", "index", f"pairs:{VAL}", "--index", "askubuntu", "--no-progress", *common],
    ):
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code in (0, None), argv
    return trial, sidecar_url, model


def test_the_pipeline_fills_every_document(piped):
    es_url, _, _ = piped
    client = _es(es_url)
    meta = client.indices.get_mapping(index="askubuntu")["askubuntu"]["mappings"]["_meta"]["esrerank"]
    assert meta["embedding"]["pipeline"]
    total = client.count(index="askubuntu")["count"]
    assert total == 1804
    with_vector = client.count(index="askubuntu", query={"exists": {"field": "vector"}})["count"]
    with_bow = client.count(index="askubuntu", query={"exists": {"field": "bow"}})["count"]
    assert with_vector == total and with_bow >= total - 5
    dollars = client.search(index="askubuntu", query={"match_phrase": {"body": "HOME"}}, size=50)["hits"][
        "hits"
    ]
    for hit in dollars:
        assert "${" not in hit["_source"]["rerank_text"]


def test_a_plain_bulk_of_the_dry_run_file_is_embedded_by_the_pipeline(piped, cli, tmp_path):
    es_url, sidecar_url, _ = piped
    out = tmp_path / "bulk.ndjson"
    code, _, err = cli(
        ["es", "index", f"pairs:{VAL}", "--index", "askubuntu", "--dry-run", "--out", str(out)]
    )
    assert code == 0, err
    client = _es(es_url)
    client.delete_by_query(index="askubuntu", query={"match_all": {}}, refresh=True)
    answer = client.bulk(operations=out.read_text(encoding="utf-8"), refresh=True)
    assert not answer["errors"], [i for i in answer["items"] if "error" in next(iter(i.values()))][:3]
    assert client.count(index="askubuntu", query={"exists": {"field": "vector"}})["count"] == 1804


@pytest.mark.parametrize("query", ["echo ${HOME} in a script", "apache ${APACHE_LOG_DIR} 403", "${api_key}"])
def test_native_mode_answers_text_with_placeholders(piped, cli, query):
    es_url, sidecar_url, _ = piped
    code, out, err = cli(
        [
            "es",
            "search",
            query,
            "--mode",
            "native",
            "--json",
            "--index",
            "askubuntu",
            *_common(es_url, sidecar_url),
        ]
    )
    assert code == 0, err
    assert json.loads(out)["reranked"] is True


def test_from_index_copies_and_extends_a_plain_index(piped, cli):
    es_url, sidecar_url, model = piped
    client = _es(es_url)
    client.indices.create(
        index="forum",
        mappings={
            "properties": {
                "question": {"properties": {"title": {"type": "text"}, "text": {"type": "text"}}},
                "qid": {"type": "keyword"},
            }
        },
    )
    hits = client.search(index="askubuntu", size=300, query={"match_all": {}})["hits"]["hits"]
    ops = []
    for hit in hits:
        ops += [
            {"index": {"_index": "forum"}},
            {
                "question": {"title": hit["_source"]["title"], "text": hit["_source"]["body"]},
                "qid": hit["_id"],
            },
        ]
    client.bulk(operations=ops, refresh=True)
    fields = ["--from-index", "forum", "--title-field", "question.title", "--body-field", "question.text"]
    code, out, err = cli(
        [
            "es",
            "setup",
            str(model),
            "--index",
            "forum-reranked",
            *fields,
            "--id-field",
            "qid",
            "--sidecar-from-es",
            "http://reranker:8080",
            "--no-progress",
            *_common(es_url, sidecar_url),
        ]
    )
    assert code == 0, err
    assert client.count(index="forum-reranked")["count"] == 300
    assert "text" not in client.indices.get_mapping(index="forum")["forum"]["mappings"]["properties"]
    code, out, err = cli(
        [
            "es",
            "setup",
            str(model),
            *fields,
            "--in-place",
            "--sidecar-from-es",
            "http://reranker:8080",
            "--no-progress",
            *_common(es_url, sidecar_url),
        ]
    )
    assert code == 0, err
    assert client.count(index="forum", query={"exists": {"field": "vector"}})["count"] == 300
    for index in ("forum-reranked", "forum"):
        code, out, err = cli(
            [
                "es",
                "search",
                "grub does not boot",
                "--mode",
                "hybrid",
                "--json",
                "--index",
                index,
                *_common(es_url, sidecar_url),
            ]
        )
        assert code == 0, (index, err)
        assert json.loads(out)["hits"]


def test_allow_rerank_failures_keeps_the_first_stage_order(piped, sidecar, cli):  # noqa: F811
    es_url, sidecar_url, _ = piped
    container = sidecar[0]
    first = cli(
        [
            "es",
            "search",
            "grub does not boot",
            "--mode",
            "native",
            "--json",
            "--index",
            "askubuntu",
            "--first-stage",
            "bm25",
            *_common(es_url, sidecar_url),
        ]
    )
    container.get_wrapped_container().stop()
    try:
        code, _, err = cli(
            [
                "es",
                "search",
                "grub does not boot",
                "--mode",
                "native",
                "--index",
                "askubuntu",
                *_common(es_url, sidecar_url),
            ]
        )
        assert code != 0 and "Traceback" not in err
        code, out, err = cli(
            [
                "es",
                "search",
                "grub does not boot",
                "--mode",
                "native",
                "--json",
                "--allow-rerank-failures",
                "--index",
                "askubuntu",
                *_common(es_url, sidecar_url),
            ]
        )
        assert code == 0, err
        result = json.loads(out)
        assert result["note"] and "first-stage order" in result["note"] and len(result["hits"]) == 10
        assert first[0] == 0
    finally:
        container.get_wrapped_container().start()
