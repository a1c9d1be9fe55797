"""``es setup``'s provisioning (``elastic/provision.py``) as the real client sends it, per licence.

The server is ``tests/elastic/es_recorder.py``'s recorder on 127.0.0.1: it answers each API in its
shape and records what arrives; it is never evidence that Elasticsearch accepts the requests (the
cluster tests are). What it shows: the order of the calls (endpoints, then the pipeline that names
them, then the index that names the pipeline), and what a platinum cluster gets — the index, no
endpoint, no pipeline, and lines that say which modes run and why the others do not.
"""

from __future__ import annotations

import json

import pytest
from es_recorder import es_client

from es_plugin_bridge.elastic.cluster.connection import ClusterInfo
from es_plugin_bridge.elastic.provision import provision
from es_plugin_bridge.elastic.setup import IndexMeta

META = IndexMeta(
    model="m",
    model_type="bow-cnn",
    dimension=4,
    neural_similarity="cosine",
    fusion={
        "bm25": {"first_stage": 0.3, "bow": 0.2, "neural": 0.5},
        "lmdirichlet": {"first_stage": 0.3, "bow": 0.2, "neural": 0.5},
    },
    text={},
)


def answers(rec) -> None:
    rec.answers[("HEAD", "/questions")] = (404, {})
    rec.answers[("GET", "/_inference/")] = (404, {"error": "missing"})
    rec.answers[("PUT", "/_inference/")] = {"inference_id": "x"}
    rec.answers[("PUT", "/_ingest/pipeline/")] = {"acknowledged": True}
    rec.answers[("PUT", "/questions")] = {"acknowledged": True, "index": "questions"}


def writes(rec) -> list[tuple[str, str]]:
    return [(r["method"], r["path"]) for r in rec.requests if r["method"] == "PUT"]


def test_trial_registers_endpoints_then_the_pipeline_then_the_index(recorder):  # noqa: F811
    rec, url = recorder
    answers(rec)
    done = provision(
        es_client(url),
        ClusterInfo((9, 1, 0), "trial", True),
        "questions",
        META,
        sidecar_from_es="http://sidecar:8080",
        token=None,
        progress=False,
    )
    paths = [p for _, p in writes(rec)]
    assert paths == [
        "/_inference/text_embedding/esrerank-questions-embed",
        "/_inference/sparse_embedding/esrerank-questions-bow",
        "/_ingest/pipeline/esrerank-questions-ingest",
        "/_inference/rerank/esrerank-questions-bm25",
        "/_inference/rerank/esrerank-questions-lmdirichlet",
        "/questions",
    ]
    index = json.loads(
        [r for r in rec.requests if r["path"] == "/questions" and r["method"] == "PUT"][0]["body"]
    )
    assert index["settings"]["default_pipeline"] == "esrerank-questions-ingest"
    stored = index["mappings"]["_meta"]["esrerank"]
    assert stored["embedding"] == {
        "text_embedding": "esrerank-questions-embed",
        "sparse_embedding": "esrerank-questions-bow",
        "pipeline": "esrerank-questions-ingest",
    }
    assert "mode native:  ready" in done.lines and any(
        "Elasticsearch embeds: endpoints" in x for x in done.lines
    )


@pytest.mark.parametrize("licence", ["basic", "platinum"])
def test_without_enterprise_the_index_is_made_and_the_lines_say_why(recorder, licence):  # noqa: F811
    rec, url = recorder
    answers(rec)
    done = provision(
        es_client(url),
        ClusterInfo((9, 1, 0), licence, True),
        "questions",
        META,
        sidecar_from_es="http://sidecar:8080",
        token=None,
        progress=False,
    )
    assert writes(rec) == [("PUT", "/questions")]
    index = json.loads(rec.requests[-1]["body"])
    assert "default_pipeline" not in index["settings"]
    text = "\n".join(done.lines)
    assert "mode native:  unavailable" in text and f"'{licence}'" in text
    assert "two calls" in text and "embeds on the client" in text and "mode bridge:  ready" in text


def test_an_existing_index_is_refused_before_anything_is_registered(recorder):  # noqa: F811
    from es_plugin_bridge.errors import UserError

    rec, url = recorder
    answers(rec)
    rec.answers[("HEAD", "/questions")] = {}
    with pytest.raises(UserError, match="already exists"):
        provision(
            es_client(url),
            ClusterInfo((9, 1, 0), "trial", True),
            "questions",
            META,
            sidecar_from_es="http://sidecar:8080",
            token=None,
            progress=False,
        )
    assert writes(rec) == []


@pytest.mark.parametrize("licence", ["basic", "platinum"])
def test_embed_at_ingest_where_it_cannot_is_refused_before_the_index(recorder, licence):  # noqa: F811
    """``--embed-at-ingest`` changes nothing where Elasticsearch embeds anyway (trial, above); where it
    cannot, setup stops in one line, naming why, and no index is made."""
    from es_plugin_bridge.errors import UserError

    rec, url = recorder
    answers(rec)
    with pytest.raises(UserError, match="--embed-at-ingest: Elasticsearch cannot embed at ingest here: .*"
                                        f"'{licence}'"):
        provision(es_client(url), ClusterInfo((9, 1, 0), licence, True), "questions", META,
                  sidecar_from_es="http://sidecar:8080", token=None, progress=False, embed_at_ingest=True)
    assert writes(rec) == []
