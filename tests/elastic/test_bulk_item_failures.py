"""One bad question fails alone, and Ctrl-C keeps the report: the bulk indexer's rules, fast (issue 34,
items 2 and 7; the same on a real OpenSearch node: ``tests/opensearch/test_index_faults.py``).

The sidecar here is the real one (``esrerank serve``'s server in a thread, the tiny BOW-CNN), called
by the product's own ``SidecarClient``; the cluster is ``test_es_bulk``'s failure-injection server
(never evidence about Elasticsearch, only about what the indexer sends and books). The questions are
the shipped SemEval dev file's, one of them made too long by pasting the others' bodies after its
title: over the sidecar's 100,000-character limit (``serving/schemas.py``).
"""

from __future__ import annotations

import json
import math
import threading
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from elasticsearch import Elasticsearch
from sidecar_apps import threaded_server
from test_es_bulk import FAST, INDEX, FakeCluster, _handler, client, cluster, questions  # noqa: F401 - fixtures

from es_plugin_bridge.bridge.sidecar_client import EmbedError, SidecarClient
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.bulk import index_questions
from es_plugin_bridge.elastic.opensearch_ingest import REFUSED, refused_by_sidecar
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.schemas import MAX_TEXT_CHARS
from es_plugin_bridge.serving.server import Limits

TOKEN = "bulk-item-failures-t0ken"
BAD = 22  # position of the over-long question among the 60
TOO_LONG = f"text is longer than {MAX_TEXT_CHARS} characters"


@pytest.fixture(scope="module")
def sidecar(exported) -> str:
    with threaded_server(ModelDirectory.load(exported["bow-cnn"], threads=1), TOKEN, Limits()) as srv:
        yield srv.url


@pytest.fixture
def sixty(questions) -> list[Question]:  # noqa: F811 - test_es_bulk's fixture
    """60 real questions, the 23rd's title followed by the others' bodies, past the sidecar's limit."""
    qs = list(questions[:60])
    wall = qs[BAD].title
    for q in questions:
        if len(wall) > MAX_TEXT_CHARS:
            break
        wall += " " + q.body
    assert len(wall) > MAX_TEXT_CHARS
    qs[BAD] = Question(qs[BAD].id, wall, "")
    return qs


class Embedding:
    """``prepare`` through the real sidecar: each question's embedding in its action; counts the calls."""

    def __init__(self, url: str, token: str = TOKEN) -> None:
        self.embedder = SidecarClient(url, token=token, timeout=60)
        self.calls: list[int] = []

    def __call__(self, batch: list[Question]) -> list[dict[str, Any]]:
        self.calls.append(len(batch))
        answer = self.embedder.embed(batch)
        return [{"title": q.title, "embedding": e} for q, e in zip(batch, answer, strict=True)]


def titles(batch: list[Question]) -> list[dict[str, Any]]:
    return [{"title": q.title} for q in batch]


def refused(exc: Exception) -> bool:
    return isinstance(exc, EmbedError) and exc.refused_a_text


def test_a_text_the_sidecar_refuses_fails_alone_and_its_batch_is_stored(cluster, client, sidecar, sixty):  # noqa: F811
    """Batches of 30: the first holds the bad text. It is split in halves, down to that text, which
    fails alone with the sidecar's message; the 59 others are stored, each sent once; the extra calls
    stay within 2·log₂(30)."""
    prepare = Embedding(sidecar)
    report = index_questions(client, INDEX, sixty, prepare, batch_size=30, batch_refused=refused, **FAST)
    assert (report.read, report.indexed, report.failed) == (60, 59, 1) and report.ok is False
    (failure,) = report.failures
    assert failure.id == sixty[BAD].id and TOO_LONG in failure.reason and "400" in failure.reason
    assert set(cluster.docs) == {q.id for q in sixty} - {sixty[BAD].id}
    assert set(cluster.sends().values()) == {1}
    assert len(prepare.calls) <= 1 + 2 * math.ceil(math.log2(30)) + 1  # the split batch, then the second


def test_a_refused_text_checked_before_sending_costs_no_bisection(cluster, client, sidecar, questions):  # noqa: F811
    """``refusal`` (the sidecar's own rule, ``sidecar_text.sidecar_refusal``, as ``es index`` passes it):
    one over-long text among 200 fails alone, named, before the sidecar is called; the other 199 take
    one call (the bisection took up to 17)."""
    from es_plugin_bridge.text.sidecar_text import sidecar_refusal

    batch = list(questions[:200])
    assert len(batch) == 200
    batch[BAD] = Question(batch[BAD].id, "x " * (MAX_TEXT_CHARS // 2 + 1), "")
    prepare = Embedding(sidecar)
    report = index_questions(client, INDEX, batch, prepare, batch_size=200, batch_refused=refused,
                             refusal=sidecar_refusal, **FAST)
    assert prepare.calls == [199]
    assert (report.read, report.indexed, report.failed) == (200, 199, 1)
    (failure,) = report.failures
    assert failure.id == batch[BAD].id and TOO_LONG in failure.reason
    assert set(cluster.docs) == {q.id for q in batch} - {batch[BAD].id}


def test_a_batch_over_the_sidecars_body_cap_is_split_until_it_fits(cluster, client, exported, questions):  # noqa: F811
    """A sidecar served with a smaller ``--max-body-mb`` than ``es index``'s batch needs answers 413 (its
    lingering close lets the client read it while the rest of the body is still on its way:
    ``serving/server.py``), a refusal of what was sent, so the batch is split until each part fits:
    every question stored, none failed. Before, the server closed on the unread rest, the client read
    "connection reset" (and was told the sidecar was likely at its connection limit), and the whole batch
    failed as unanswered. The batch is the SemEval questions 48 times over (new ids), 7.5 MB of JSON
    against a 1 MB cap: more than the loopback sockets hold before the server reads it (a batch that
    fits in them reached the 413 before too)."""
    batch = [Question(f"{q.id}~{copy}", q.title, q.body) for copy in range(48) for q in questions]
    limits = Limits(max_body_bytes=1024 * 1024)
    with threaded_server(ModelDirectory.load(exported["bow-cnn"], threads=1), TOKEN, limits) as srv:
        prepare = Embedding(srv.url)
        report = index_questions(client, INDEX, batch, prepare, batch_size=len(batch), batch_refused=refused,
                                 **FAST)
    assert (report.read, report.indexed, report.failed) == (len(batch), len(batch), 0), report.failures[:3]
    assert prepare.calls[:3] == [len(batch), len(batch) // 2, len(batch) // 4]  # refused, then halved
    assert set(cluster.docs) == {q.id for q in batch} and set(cluster.sends().values()) == {1}


def test_a_wrong_token_is_not_split_text_by_text(cluster, client, sidecar, sixty):  # noqa: F811
    """401 is about the caller, not a text: one call per batch, and three failed batches stop the run."""
    prepare = Embedding(sidecar, token="not-the-token")
    report = index_questions(client, INDEX, sixty * 2, prepare, batch_size=20, batch_refused=refused, **FAST)
    assert prepare.calls == [20, 20, 20] and report.indexed == 0
    assert report.aborted is not None and "401" in report.failures[0].reason


class ProcessorBatches(FakeCluster):
    """As an ingest processor that embeds a bulk's documents in one call (neural-search's
    ``text_embedding``): a bulk holding ``bad`` fails every one of its items with ml-commons' refusal."""

    def __init__(self, bad: str) -> None:
        super().__init__()
        self.bad = bad

    def bulk(self, body: bytes) -> tuple[int, dict[str, Any] | None]:
        heads = body.decode("utf-8").splitlines()[0::2]
        if self.bad not in {json.loads(head)["index"]["_id"] for head in heads}:
            return super().bulk(body)
        status, answer = super().bulk(body)
        for entry in answer["items"]:
            item = entry["index"]
            id_ = item["_id"]
            self.docs.pop(id_, None)
            item.update(status=400, error={"type": "status_exception", "reason": f"{REFUSED}: "
                                           f'{{"error":"texts.7: {TOO_LONG}","field":"texts.7"}}'})
        return status, answer


def test_items_an_ingest_processor_failed_together_are_resent_until_the_bad_one_is_alone(
        questions):  # noqa: F811
    qs = list(questions[:60])
    fake = ProcessorBatches(qs[BAD].id)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    es = Elasticsearch(f"http://127.0.0.1:{server.server_address[1]}", request_timeout=5)
    try:
        report = index_questions(es, INDEX, qs, titles, batch_size=30, item_refused=refused_by_sidecar,
                                 **FAST)
    finally:
        es.close()
        server.shutdown()
        server.server_close()
    assert (report.read, report.indexed, report.failed) == (60, 59, 1)
    (failure,) = report.failures
    assert failure.id == qs[BAD].id and failure.status == 400 and REFUSED in failure.reason
    assert TOO_LONG in failure.reason
    assert set(fake.docs) == {q.id for q in qs} - {qs[BAD].id}
    assert len(fake.bulk_sends) <= 2 * math.ceil(math.log2(30)) + 2


def test_ctrl_c_ends_the_run_with_its_report(cluster, client, questions):  # noqa: F811
    """KeyboardInterrupt while the third batch is prepared: the report says so, every question read is
    booked (the third batch's as interrupted), and what was stored is counted."""
    qs = list(questions[:100])
    seen: list[int] = []

    def prepare(batch: list[Question]) -> list[dict[str, Any]]:
        seen.append(len(batch))
        if len(seen) == 3:
            raise KeyboardInterrupt
        return [{"title": q.title} for q in batch]

    try:
        report = index_questions(client, INDEX, qs, prepare, batch_size=20, **FAST)
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped the indexer: its report is lost")
    assert report.interrupted and report.aborted.startswith("interrupted (Ctrl-C)")
    assert (report.read, report.indexed, report.failed) == (60, 40, 20)
    assert [f.id for f in report.failures] == [q.id for q in qs[40:60]]
    assert all("interrupted" in f.reason for f in report.failures)
    assert set(cluster.docs) == {q.id for q in qs[:40]}
