"""The sidecar bounds its work (issue 48, item 3), on the real server (waitress) and the real app:

- the queue: with ``max_queue`` requests in, the next POST is answered 503 at once with ``Retry-After``
  and a JSON error (answered on the event loop, not behind the work), and the place is free again once
  an answer is written;
- the deadline: a request whose ``X-Request-Timeout-Ms`` passed while it waited for a thread is
  answered 504 naming it and is never computed (the encoding cache sees no miss), as is the request of
  a client that hung up while it waited; a deadline that passes during the work is a 504, never a
  late 200; a bad header value is a 400 naming the header;
- the encoder workers skip the batches of a request whose check fails (the deadline between batches);
- a request the encoder's backlog, at its timed pace, would finish past its deadline is refused 503
  with ``Retry-After`` before it queues.

To hold the server's one request thread for as long as the test says, the real app sits behind a
gate: its first request waits for the test to open it (the work behind the gate is the app's own).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from es_plugin_bridge.bridge.sidecar_client import SidecarClient, SidecarUnavailable
from es_plugin_bridge.data.questions import split_title_body
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving import ModelDirectory, deadline
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.batching import EncoderPool
from es_plugin_bridge.serving.server import Limits, Server

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
VAL = (SAMPLES / "askubuntu-pairs" / "val.tsv").read_text(encoding="utf-8").splitlines()
#: Real AskUbuntu questions (title and HTML body), the second column of the validation pairs.
QUESTIONS = [line.split("\t")[1] for line in VAL]


class Gated:
    """The sidecar app, whose first call waits until :meth:`open` (it holds the server's one thread)."""

    def __init__(self, app: Any) -> None:
        self.app, self.entered, self.gate, self.first = app, threading.Event(), threading.Event(), True

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if self.first:
            self.first = False
            self.entered.set()
            self.gate.wait(30)
        return self.app(environ, start_response)

    def open(self) -> None:
        self.gate.set()


@pytest.fixture(scope="module")
def model(exported) -> ModelDirectory:
    return ModelDirectory.load(exported["bow-cnn"], threads=1)


@contextlib.contextmanager
def gated_server(model: ModelDirectory, max_queue: int) -> Iterator[tuple[Server, Gated]]:
    app = create_app(model, cache_size=10_000)
    gated = Gated(app)
    srv = Server(gated, host="127.0.0.1", port=0, threads=1, limits=Limits(max_queue=max_queue),
                 on_reject=app.extensions["esrerank_metrics"].reject)
    srv.servers[0].on_drop = app.extensions["esrerank_metrics"].drop  # the gate hides the app's extensions
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        yield srv, gated
    finally:
        gated.open()
        srv.close()
        thread.join(timeout=5)


def _body(start: int, n: int = 20) -> dict[str, Any]:
    return {"query": QUESTIONS[start], "documents": QUESTIONS[start + 1 : start + 1 + n]}


def _post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None,
          ) -> tuple[int, dict[str, Any], dict[str, str]]:
    req = urllib.request.Request(f"{url}/v1/rerank", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def _in_background(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    return thread, out


def _metric(url: str, line_start: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start))


def _misses(url: str) -> float:
    return _metric(url, "esrerank_encoding_cache_misses_total")


def test_a_full_queue_answers_503_with_retry_after_at_once(model):
    with gated_server(model, max_queue=2) as (srv, gated):
        first, first_out = _in_background(_post, srv.url, _body(0))
        assert gated.entered.wait(10)  # one computing (held), one waiting:
        second, second_out = _in_background(_post, srv.url, _body(30))
        time.sleep(0.3)
        started = time.monotonic()
        status, answer, headers = _post(srv.url, _body(60))
        assert time.monotonic() - started < 1.0  # told at once, not after the two ahead of it
        assert status == 503 and headers["Retry-After"] == "1"
        assert answer == {"error": "Service Unavailable: the sidecar is busy (queue full: 2 requests in, its "
                                   "--max-queue); retry after 1 s"}
        gated.open()
        first.join(30)
        second.join(30)
        assert first_out[0][0] == 200 and second_out[0][0] == 200
        assert _post(srv.url, _body(60))[0] == 200  # the places are free again
        assert _metric(srv.url, 'esrerank_requests_rejected_total{reason="queue_full",status="503"}') == 1


def test_the_bridge_says_busy_and_its_deadline_drops_the_work_it_stopped_waiting_for(model):
    questions = _questions(QUESTIONS[100:111])  # none of them in the other requests
    with gated_server(model, max_queue=3) as (srv, gated):
        first, _ = _in_background(_post, srv.url, _body(0))
        assert gated.entered.wait(10)
        # Waits in the queue; gives up after 0.6 s, having told the sidecar (X-Request-Timeout-Ms 350).
        with pytest.raises(SidecarUnavailable, match="timed out after 0.6 s"):
            second, _ = _in_background(_post, srv.url, _body(30))
            time.sleep(0.3)
            SidecarClient(srv.url, timeout=0.6).rerank(questions[0], questions[1:])
        with pytest.raises(SidecarUnavailable) as busy:  # three in (the one given up on too): full
            SidecarClient(srv.url, timeout=5).rerank(questions[0], questions[1:])
        assert str(busy.value) == "the sidecar is busy (queue full): it answered 503, retry after 1 s"
        gated.open()
        first.join(30)
        second.join(30)
        time.sleep(0.3)
        assert _metric(srv.url, 'esrerank_work_dropped_total{stage="client_gone_before_start"}') == 1
        misses = _misses(srv.url)
        assert SidecarClient(srv.url, timeout=10).rerank(questions[0], questions[1:])
        # the request given up on was never computed: had it been, its questions would be cached now
        assert _misses(srv.url) >= misses + 10


def test_a_request_past_its_deadline_before_it_starts_is_never_computed(model):
    with gated_server(model, max_queue=8) as (srv, gated):
        first, _ = _in_background(_post, srv.url, _body(0))
        assert gated.entered.wait(10)
        late, late_out = _in_background(_post, srv.url, _body(30), {"X-Request-Timeout-Ms": "200"})
        time.sleep(0.5)  # its deadline passes while it waits for the held thread
        gated.open()
        first.join(30)
        late.join(30)
        misses = _misses(srv.url)
        status, answer, _ = late_out[0]
        assert status == 504
        assert answer["error"].startswith("the request's deadline of 200 ms (X-Request-Timeout-Ms) passed ")
        assert answer["error"].endswith("before start: not computed")
        assert _metric(srv.url, 'esrerank_work_dropped_total{stage="before_start"}') == 1
        assert _post(srv.url, _body(30))[0] == 200  # the same request in time is computed:
        assert _misses(srv.url) > misses  # its questions were not encoded when it was dropped


def test_a_client_that_hung_up_while_queued_costs_no_work(model):
    with gated_server(model, max_queue=8) as (srv, gated):
        first, _ = _in_background(_post, srv.url, _body(0))
        assert gated.entered.wait(10)
        data = json.dumps(_body(30)).encode()
        with socket.create_connection((srv.host, srv.port), timeout=5) as sock:
            sock.sendall(b"POST /v1/rerank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
            time.sleep(0.3)
        time.sleep(0.3)  # the server sees it hang up while its request waits
        gated.open()
        first.join(30)
        time.sleep(0.3)
        assert _metric(srv.url, 'esrerank_work_dropped_total{stage="client_gone_before_start"}') == 1
        misses = _misses(srv.url)
        assert _post(srv.url, _body(30))[0] == 200
        # Had the hung-up request been computed, these questions would have been cached (no new misses).
        assert _misses(srv.url) > misses


def test_a_deadline_passing_during_the_work_is_a_504_never_a_late_200(model):
    app = create_app(model, cache_size=0)
    client = app.test_client()
    body = {"query": QUESTIONS[0], "documents": QUESTIONS[1:201]}
    answer = client.post("/v1/rerank", json=body, headers={"X-Request-Timeout-Ms": "1"})
    assert answer.status_code == 504 and "deadline of 1 ms" in answer.get_json()["error"]
    assert client.post("/v1/rerank", json=body).status_code == 200  # the default deadline: 4.5 s
    for bad in ("0", "-5", "1.5", "soon", "600001"):
        answer = client.post("/v1/rerank", json=body, headers={"X-Request-Timeout-Ms": bad})
        assert answer.status_code == 400 and answer.get_json()["field"] == "X-Request-Timeout-Ms", bad


def _questions(texts: list[str]) -> list[Question]:
    return [Question(str(i), *split_title_body(text)) for i, text in enumerate(texts)]


def test_the_encoder_workers_skip_the_batches_of_a_request_past_its_check(exported):
    model = ModelDirectory.load(exported["bow-cnn"], threads=1, batch_size=8)
    questions = [Question("", *split_title_body(text)) for text in QUESTIONS[:64]]
    encoded = [model.token_ids(q) for q in questions]
    batches = len(model.runs(encoded))
    assert batches >= 4
    pool = EncoderPool(model, 1)
    checks = 0

    def check() -> None:
        nonlocal checks
        checks += 1
        if checks > 1:
            raise TimeoutError("past the deadline")

    try:
        with pytest.raises(TimeoutError):
            pool.vectors(encoded, check)
        assert pool.calls == 1  # the first batch ran; every later one was skipped
        assert (pool.vectors(encoded) == model.vectors_from_ids(encoded)).all()  # without a check: all
    finally:
        pool.close()


def test_a_request_whose_encoding_would_now_end_too_late_stops_before_its_next_batch(exported):
    """Admitted at one pace, a request whose pace rose (the machine got busier) is checked again before each
    of its batches: the pool gives ``late`` the seconds until the request's last batch would be done (fewer
    rows ahead, sooner, batch by batch), and ``deadline.late_checker`` stops it once that would end past
    its deadline (stage ``predicted_late_batch``, a 504): the batches not run are not computed, so no
    whole window is computed for a client whose deadline passes."""
    model = ModelDirectory.load(exported["bow-cnn"], threads=1, batch_size=8)
    encoded = [model.token_ids(Question("", *split_title_body(text))) for text in QUESTIONS[:64]]
    assert len(model.runs(encoded)) >= 4
    pool = EncoderPool(model, 1)
    try:
        pool.vectors(encoded)  # the pace, timed
        calls, pace, seen = pool.calls, pool.pace_s, []

        def late(finish_s: float) -> None:
            seen.append(finish_s)
            pool.pace_s = pace * 1_000_000  # the machine slows down after the first batch
            checker(finish_s)

        deadline.set_current(deadline.Deadline.starting(time.monotonic(), 4000))
        try:
            checker = deadline.late_checker()
            assert checker is not None
            checker(3.9)  # ends about 100 ms before the deadline: run (admission kept the margin)
            with pytest.raises(deadline.WorkAbandoned) as stopped:
                checker(4.1)
            assert stopped.value.stage == "predicted_late_batch"
            with pytest.raises(deadline.WorkAbandoned) as stopped:
                pool.vectors(encoded, late=late)
        finally:
            deadline.set_current(None)
        assert stopped.value.stage == "predicted_late_batch"
        assert "would pass before its encoding is done" in stopped.value.message
        assert pool.calls == calls + 1 and len(seen) == 2  # the first batch ran, the second was stopped
        assert 0 < seen[0] < 4.0 < seen[1]
        pool.pace_s = pace
        assert (pool.vectors(encoded) == model.vectors_from_ids(encoded)).all()  # without a check: all
    finally:
        pool.close()


def test_a_request_its_encoder_backlog_would_finish_late_is_refused_503_before_it_queues(model):
    """The pool's pace (seconds per fed row, timed on its own calls) and backlog predict when a request's
    misses would be encoded; one predicted past its deadline is answered 503 with Retry-After before it
    queues, nothing encoded for it. A machine 10,000 times slower is stood for by its pace alone."""
    app = create_app(model, cache_size=0, encoder_workers=2)
    client = app.test_client()
    body = {"query": QUESTIONS[0], "documents": QUESTIONS[1:101]}
    assert client.post("/v1/rerank", json=body).status_code == 200
    pool = app.extensions["esrerank"].encoder
    measured = pool.pace_s
    assert measured is not None and measured > 0
    assert pool.predicted_s(200) > pool.predicted_s(100) > 0  # more rows, later
    calls = pool.calls
    pool.pace_s = measured * 10_000
    slow = pool.predicted_s(101)
    answer = client.post("/v1/rerank", json=body, headers={"X-Request-Timeout-Ms": "4000"})
    assert answer.status_code == 503, answer.get_json()
    # Retry-After: the seconds the prediction overshoots what is left of the deadline, in 1..30 (the
    # request's distinct misses, at most the 101 texts, at the slow pace: at most ``slow``).
    assert 1 <= int(answer.headers["Retry-After"]) <= min(30, int(slow) + 1)
    error = answer.get_json()["error"]
    assert error.startswith("the sidecar is busy: its encoder would finish this request in ")
    assert "past its deadline (4000 ms" in error and error.endswith(" s")
    assert pool.calls == calls  # nothing encoded for it
    pool.pace_s = measured
    assert client.post("/v1/rerank", json=body, headers={"X-Request-Timeout-Ms": "4000"}).status_code == 200
    assert pool.calls > calls
    # The bridge says which refusal it was, in its fallback reason (the sidecar on a real server).
    pool.pace_s = measured * 10_000
    srv = Server(app, host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    try:
        with pytest.raises(SidecarUnavailable) as busy:
            SidecarClient(srv.url, timeout=5.0).rerank(_questions(QUESTIONS[:1])[0],
                                                       _questions(QUESTIONS[1:101]))
    finally:
        srv.close()
        thread.join(timeout=5)
    assert str(busy.value).startswith("the sidecar is busy (predicted past the deadline): it answered 503, "
                                      "retry after ")
    assert pool.calls > calls


def test_the_encoder_must_leave_the_answer_its_margin_of_the_deadline(model):
    """Work predicted to end inside the last 5 % of a deadline (at least 100 ms) is refused as late: the
    answer still has to be fused, serialised and sent, and the request waited for the event loop before
    its first byte was timed. Predicted at 3.9 s of a 4,000 ms deadline (margin 200 ms): 503; at 3.5 s:
    answered. The pace alone stands for the slow machine, as above; the rows predicted for are the
    request's distinct misses (no cache), as the service asks."""
    assert deadline.answer_margin_s(4000) == pytest.approx(0.2)
    assert deadline.answer_margin_s(1000) == pytest.approx(0.1)  # the floor
    app = create_app(model, cache_size=0, encoder_workers=2)
    client = app.test_client()
    body = {"query": QUESTIONS[0], "documents": QUESTIONS[1:101]}
    pool = app.extensions["esrerank"].encoder
    asked: list[int] = []
    predicted_s = pool.predicted_s
    pool.predicted_s = lambda rows: asked.append(rows) or predicted_s(rows)  # type: ignore[method-assign]
    assert client.post("/v1/rerank", json=body).status_code == 200
    rows, measured, headers = asked[-1], pool.pace_s, {"X-Request-Timeout-Ms": "4000"}
    assert 90 <= rows <= 101
    pool.pace_s = 3.9 * pool.workers / rows
    answer = client.post("/v1/rerank", json=body, headers=headers)
    assert asked[-1] == rows and predicted_s(rows) == pytest.approx(3.9)
    assert answer.status_code == 503 and "past its deadline (4000 ms" in answer.get_json()["error"]
    assert "200 ms of them kept for the answer" in answer.get_json()["error"]
    pool.pace_s = 3.5 * pool.workers / rows
    assert client.post("/v1/rerank", json=body, headers=headers).status_code == 200
    pool.pace_s = measured
