"""The bulk indexer's retry, resume and failure accounting, by failure injection.

The server here is a few lines of ``http.server`` on 127.0.0.1 that answers the requests the
indexer sends (``HEAD /{index}``, ``POST /{index}/_bulk``, ``POST /{index}/_mget``) in the shapes
of Elasticsearch's bulk and multi-get APIs, with errors the test chooses. It is failure injection
only: it is NEVER evidence that the indexer works with Elasticsearch. That is what the testcontainers
tests against a real cluster are for. What these tests do show is that the real ``elasticsearch``
client, driven by the indexer, resends exactly the items it should, fails exactly the ones it should,
and that every id read ends up counted once. The items are the real questions of the shipped SemEval
dev file.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from elasticsearch import Elasticsearch

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.bulk import BulkReport, index_questions
from es_plugin_bridge.errors import UserError

SEMEVAL = (Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "semeval2016-task3"
           / "SemEval2016-Task3-CQA-QL-dev.xml")
INDEX = "questions"
FAST = {"initial_backoff": 0.01, "max_backoff": 0.05, "progress": False}

ITEM_ERRORS = {
    429: {"type": "es_rejected_execution_exception",
          "reason": "rejected execution of primary operation [coordinating_and_primary_bytes=0]"},
    500: {"type": "exception", "reason": "injected internal failure"},
    503: {"type": "unavailable_shards_exception", "reason": "[questions][0] primary shard is not active"},
    400: {"type": "mapper_parsing_exception", "reason": "failed to parse field [title] of type [text]",
          "caused_by": {"type": "illegal_argument_exception", "reason": "injected"}},
}


class FakeCluster:
    """Answers like Elasticsearch's bulk/mget APIs, with injected errors; records what it was sent.

    ``item_plan[id]``: statuses to answer for that id on its successive sends, then success.
    ``request_plan``: answers for successive whole bulk requests (a status, or "drop" to close the
    connection without answering), then normal answers. ``truncate_next``: drop that many items from
    the next bulk answer.
    """

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.item_plan: dict[str, list[int]] = {}
        self.request_plan: list[int | str] = []
        self.truncate_next = 0
        self.bulk_sends: list[list[str]] = []
        self.bulk_times: list[float] = []
        self.mget_calls: list[tuple[list[str], dict[str, list[str]]]] = []
        self.lock = threading.Lock()

    def sends(self) -> Counter[str]:
        return Counter(id_ for ids in self.bulk_sends for id_ in ids)

    def bulk(self, body: bytes) -> tuple[int, dict[str, Any] | None]:
        lines = [json.loads(line) for line in body.decode("utf-8").splitlines() if line.strip()]
        actions, sources = lines[0::2], lines[1::2]
        ids = [action["index"]["_id"] for action in actions]
        with self.lock:
            self.bulk_sends.append(ids)
            self.bulk_times.append(time.monotonic())
            if self.request_plan:
                answer = self.request_plan.pop(0)
                if answer == "drop":
                    return 0, None
                error = ITEM_ERRORS[int(answer)]
                return int(answer), {"error": {"root_cause": [error], **error}, "status": answer}
            items = []
            for action, source in zip(actions, sources, strict=True):
                id_, index = action["index"]["_id"], action["index"]["_index"]
                plan = self.item_plan.get(id_, [])
                if plan:
                    status = plan.pop(0)
                    items.append({"index": {"_index": index, "_id": id_, "status": status,
                                            "error": ITEM_ERRORS[status]}})
                    continue
                created = id_ not in self.docs
                self.docs[id_] = source
                items.append({"index": {"_index": index, "_id": id_, "_version": 1,
                                        "result": "created" if created else "updated",
                                        "status": 201 if created else 200}})
            if self.truncate_next:
                items, self.truncate_next = items[: -self.truncate_next], 0
        return 200, {"took": 1, "errors": any(i["index"]["status"] >= 300 for i in items), "items": items}

    def mget(self, body: bytes, query: dict[str, list[str]]) -> dict[str, Any]:
        ids = json.loads(body)["ids"]
        with self.lock:
            self.mget_calls.append((ids, query))
            docs = [{"_index": INDEX, "_id": id_, "found": id_ in self.docs} for id_ in ids]
        return {"docs": [dict(doc, _version=1) if doc["found"] else doc for doc in docs]}


def _handler(cluster: FakeCluster) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()  # headers and body go out as separate writes: no 40 ms Nagle wait on each
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args: Any) -> None:  # keep pytest's output clean
            pass

        def _answer(self, status: int, body: dict[str, Any] | None) -> None:
            data = b"" if body is None else json.dumps(body).encode("utf-8")
            self.send_response(status)
            # The 9.x client refuses a 2xx answer without this header (elasticsearch/_sync/client/_base.py).
            self.send_header("X-Elastic-Product", "Elasticsearch")
            self.send_header("Content-Type", "application/vnd.elasticsearch+json;compatible-with=9")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def do_HEAD(self) -> None:
            self._answer(200 if urlsplit(self.path).path == f"/{INDEX}" else 404, None)

        def do_GET(self) -> None:
            if urlsplit(self.path).path == "/":
                self._answer(200, {"name": "fake", "cluster_name": "failure-injection",
                                   "version": {"number": "9.5.1", "build_flavor": "default"},
                                   "tagline": "You Know, for Search"})
            else:
                self.do_POST()

        def do_POST(self) -> None:
            url = urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if url.path == f"/{INDEX}/_bulk":
                status, answer = cluster.bulk(body)
                if status == 0:  # a transport error: close without answering
                    self.close_connection = True
                    return
                self._answer(status, answer)
            elif url.path == f"/{INDEX}/_mget":
                self._answer(200, cluster.mget(body, parse_qs(url.query)))
            else:
                self._answer(404, {"error": {"type": "index_not_found_exception", "reason": url.path},
                                   "status": 404})

        do_PUT = do_POST  # the client sends PUT /{index}/_bulk

    return Handler


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    yield FakeCluster()


@pytest.fixture
def client(cluster: FakeCluster) -> Iterator[Elasticsearch]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(cluster))
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    es = Elasticsearch(f"http://127.0.0.1:{server.server_address[1]}", request_timeout=5)
    yield es
    es.close()
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    return list(read_spec(f"semeval:{SEMEVAL}").questions.values())


class Prepare:
    """A ``prepare`` that records its calls and fails (as a down sidecar would) for chosen batches."""

    def __init__(self, fail_on: set[str] | None = None, always_fail: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail_on = fail_on or set()
        self.always_fail = always_fail

    def __call__(self, batch: list[Question]) -> list[dict[str, Any]]:
        ids = [q.id for q in batch]
        self.calls.append(ids)
        if self.always_fail or self.fail_on & set(ids):
            raise ConnectionError("sidecar at http://127.0.0.1:8080/v1/encode refused the connection")
        return [{"_id": q.id, "title": q.title, "body": q.body} for q in batch]


def _ids(qs: list[Question]) -> list[str]:
    return [q.id for q in qs]


def _check_books(report: BulkReport) -> None:
    assert report.read == report.indexed + report.skipped + report.failed
    assert report.failed == len(report.failures)


def test_indexes_every_question_once_with_its_source(cluster, client, questions):
    prepare = Prepare()
    report = index_questions(client, INDEX, questions, prepare, batch_size=128, **FAST)
    assert (report.read, report.indexed, report.skipped, report.failed) == (550, 550, 0, 0)
    assert report.ok and report.failures == [] and report.retries == 0
    assert [len(c) for c in prepare.calls] == [128, 128, 128, 128, 38]
    assert cluster.bulk_sends == prepare.calls
    assert cluster.docs == {q.id: {"title": q.title, "body": q.body} for q in questions}


def test_item_429_and_5xx_are_resent_and_other_errors_fail_at_once(cluster, client, questions):
    qs = questions[:30]
    a, c, d, b, e = (qs[n].id for n in (1, 5, 7, 12, 25))
    cluster.item_plan = {a: [429], b: [429], c: [500, 503], d: [400], e: [429, 429, 429]}
    report = index_questions(client, INDEX, qs, Prepare(), batch_size=10, max_retries=2, **FAST)

    _check_books(report)
    assert (report.read, report.indexed, report.failed) == (30, 28, 2)
    assert [(f.id, f.status) for f in report.failures] == [(d, 400), (e, 429)]
    assert report.failures[0].reason.startswith("mapper_parsing_exception: failed to parse field [title]")
    assert "caused by illegal_argument_exception" in report.failures[0].reason
    assert report.failures[1].reason.startswith("es_rejected_execution_exception")
    # Only the retryable items are resent, each as often as planned; the 400 is sent once.
    ids = _ids(qs)
    assert cluster.bulk_sends == [ids[:10], [a, c], [c], ids[10:20], [b], ids[20:], [e], [e]]
    assert cluster.sends()[d] == 1 and cluster.sends()[e] == 3
    assert report.retries == 6
    assert set(cluster.docs) == set(ids) - {d, e}
    printed = "\n".join(report.lines())
    assert f"failed {d}: 400 mapper_parsing_exception" in printed and f"failed {e}: 429" in printed
    assert not report.ok


def test_whole_request_429_then_503_is_resent_with_growing_back_off(cluster, client, questions):
    qs = questions[:20]
    cluster.request_plan = [429, 503]
    opts = dict(FAST, initial_backoff=0.05, max_backoff=1.0)
    report = index_questions(client, INDEX, qs, Prepare(), batch_size=10, max_retries=3, **opts)

    assert report.ok and (report.read, report.indexed, report.failed) == (20, 20, 0)
    ids = _ids(qs)
    assert cluster.bulk_sends == [ids[:10], ids[:10], ids[:10], ids[10:]]
    assert report.retries == 20
    t = cluster.bulk_times
    assert t[1] - t[0] >= 0.05 and t[2] - t[1] >= 0.10


@pytest.mark.parametrize(("plan", "sends", "status", "kind"), [
    ([503, 503, 503], 3, 503, "unavailable_shards_exception"),  # retryable, but more often than max_retries
    ([400], 1, 400, "mapper_parsing_exception"),  # not retryable: failed after one send
])
def test_whole_request_errors_past_retries_fail_every_id_of_the_batch(cluster, client, questions,
                                                                      plan, sends, status, kind):
    qs = questions[:20]
    cluster.request_plan = list(plan)
    report = index_questions(client, INDEX, qs, Prepare(), batch_size=10, max_retries=2, **FAST)

    _check_books(report)
    assert (report.indexed, report.failed) == (10, 10)
    assert [f.id for f in report.failures] == _ids(qs[:10])
    assert {f.status for f in report.failures} == {status}
    assert all(f.reason.startswith(f"bulk request failed: {kind}") for f in report.failures)
    assert cluster.bulk_sends == [_ids(qs[:10])] * sends + [_ids(qs[10:])]
    assert set(cluster.docs) == set(_ids(qs[10:]))


def test_dropped_connection_is_resent(cluster, client, questions):
    qs = questions[:20]
    cluster.request_plan = ["drop"]
    report = index_questions(client, INDEX, qs, Prepare(), batch_size=10, max_retries=1, **FAST)
    assert report.ok and report.indexed == 20 and report.retries == 10
    assert cluster.bulk_sends == [_ids(qs[:10]), _ids(qs[:10]), _ids(qs[10:])]


def test_truncated_bulk_answer_fails_the_unanswered_ids(cluster, client, questions):
    qs = questions[:10]
    cluster.truncate_next = 2
    report = index_questions(client, INDEX, qs, Prepare(), batch_size=10, **FAST)
    _check_books(report)
    assert [(f.id, f.status) for f in report.failures] == [(qs[8].id, None), (qs[9].id, None)]
    assert all("no answer for this action" in f.reason for f in report.failures)


def test_prepare_failure_fails_its_batch_only_and_is_never_sent(cluster, client, questions):
    qs = questions[:30]
    prepare = Prepare(fail_on={qs[15].id})
    report = index_questions(client, INDEX, qs, prepare, batch_size=10, **FAST)

    _check_books(report)
    assert (report.indexed, report.failed, report.aborted) == (20, 10, None)
    assert [f.id for f in report.failures] == _ids(qs[10:20])
    assert {f.status for f in report.failures} == {None}
    assert report.failures[0].reason == ("prepare failed: ConnectionError: sidecar at "
                                         "http://127.0.0.1:8080/v1/encode refused the connection")
    assert prepare.calls == [_ids(qs[:10]), _ids(qs[10:20]), _ids(qs[20:])]
    assert cluster.bulk_sends == [_ids(qs[:10]), _ids(qs[20:])]


def test_failed_batches_in_a_row_stop_the_run_and_say_where(cluster, client, questions):
    prepare = Prepare(always_fail=True)
    report = index_questions(client, INDEX, questions, prepare, batch_size=10, abort_after_failed_batches=3,
                             **FAST)
    _check_books(report)
    assert (report.read, report.failed) == (30, 30)
    assert [f.id for f in report.failures] == _ids(questions[:30])
    assert report.aborted is not None and "3 batches in a row failed" in report.aborted
    assert f"stopped after {questions[29].id}, reading nothing further" in report.aborted
    # the read-ahead may have prepared the 4th batch while the 3rd was booked: neither sent nor counted
    assert len(prepare.calls) in (3, 4) and cluster.bulk_sends == []
    assert report.lines()[-1].startswith("stopped early: ")


def test_an_item_stop_on_names_stops_the_run_after_its_batch_unsent_again(cluster, client, questions):
    """``stop_on``: OpenSearch's ingest pipeline failing an item because its embedder cannot be reached
    (a 500 that would otherwise be resent with back-off) ends the run after that batch, with the reason;
    the other items of the batch are booked as they were answered."""
    qs = questions[:40]
    ids = _ids(qs)
    cluster.item_plan = {id_: [500] for id_ in ids[10:15]}
    seen: list[tuple[int | None, str]] = []

    def stop_on(status: int | None, reason: str) -> str | None:
        seen.append((status, reason))
        return reason if "injected internal failure" in reason else None

    report = index_questions(client, INDEX, qs, Prepare(), batch_size=10, max_retries=3, stop_on=stop_on,
                             **FAST)
    _check_books(report)
    assert (report.read, report.indexed, report.failed) == (20, 15, 5)
    assert [f.id for f in report.failures] == ids[10:15] and report.retries == 0
    assert cluster.bulk_sends == [ids[:10], ids[10:20]]  # not resent; the third batch is never read
    assert seen == [(500, "exception: injected internal failure")] * 5
    assert report.aborted is not None
    assert report.aborted.startswith(f"exception: injected internal failure; stopped after {ids[19]}")


def test_resume_skips_indexed_ids_and_prepares_only_the_rest(cluster, client, questions):
    qs = questions[:40]
    ids = _ids(qs)
    cluster.item_plan = {ids[3]: [400]}
    first = index_questions(client, INDEX, qs, Prepare(fail_on={ids[25]}), batch_size=10, **FAST)
    assert (first.indexed, first.failed) == (29, 11)

    cluster.bulk_sends.clear()
    prepare = Prepare()
    again = index_questions(client, INDEX, qs, prepare, batch_size=10, resume=True, **FAST)

    _check_books(again)
    assert again.ok and (again.read, again.skipped, again.indexed) == (40, 29, 11)
    assert prepare.calls == [[ids[3]], ids[20:30]]  # batches 2 and 4 were complete: not prepared
    assert cluster.bulk_sends == prepare.calls
    assert [call[0] for call in cluster.mget_calls] == [ids[:10], ids[10:20], ids[20:30], ids[30:]]
    assert all(call[1] == {"_source": ["false"]} for call in cluster.mget_calls)
    assert set(cluster.docs) == set(ids)


def test_missing_index_is_a_user_error_before_anything_is_prepared(client, questions):
    prepare = Prepare()
    with pytest.raises(UserError, match="index 'other' does not exist"):
        index_questions(client, "other", questions, prepare, **FAST)
    assert prepare.calls == []


def test_unreachable_cluster_is_a_user_error(questions):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    es = Elasticsearch(f"http://127.0.0.1:{port}", request_timeout=2)
    with pytest.raises(UserError, match="cannot check index 'questions': ConnectionError"):
        index_questions(es, INDEX, questions, Prepare(), **FAST)


def test_failures_of_one_reason_are_listed_three_times_then_summed_up(questions):
    """600 ids failed for one connection error printed 600 near-identical lines (issue 48, finding 10)."""
    report = BulkReport(read=len(questions))
    gone = "bulk request failed: ConnectionError: refused"
    report._fail([q.id for q in questions[:-1]], None, gone)
    report._fail([questions[-1].id], 400, "mapper_parsing_exception: bad")
    assert report.lines()[1:] == [*(f"failed {q.id}: - {gone}" for q in questions[:3]),
                                  f"failed {questions[-1].id}: 400 mapper_parsing_exception: bad",
                                  f"{len(questions) - 4} more like this: - {gone}"]
