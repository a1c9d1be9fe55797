"""``esrerank serve`` in a subprocess under load, on loopback, bounded:

- 2,000 rerank requests of 20–100 real AskUbuntu titles at concurrency 16: zero non-200, every answer
  identical to the same request answered alone (in process, one at a time), server RSS growth reported
  and bounded;
- 110 slow clients trickling their headers (slowloris) do not stop normal requests from being answered,
  and are disconnected once their request is late.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from es_plugin_bridge.local_http import free_port
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
REQUESTS, CONCURRENCY = 2000, 16
MAX_RSS_GROWTH_MB = 150
REQUEST_TIMEOUT = 5.0  # long enough that a request queued behind the slow clients is plainly late


@pytest.fixture(scope="module")
def server(exported):
    """``esrerank serve`` on the tiny bow-cnn export; yields (port, psutil.Process)."""
    port = free_port()
    exe = Path(sys.executable).with_name("esrerank")
    proc = subprocess.Popen([str(exe), "serve", str(exported["bow-cnn"]), "--port", str(port),
                             "--onnx-threads", "1", "--request-timeout", str(REQUEST_TIMEOUT),
                             "--max-queue", str(2 * CONCURRENCY)],
                            stderr=subprocess.PIPE, text=True, env={k: v for k, v in os.environ.items()
                                                                    if k != "ESRERANK_TOKEN"})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    detail = proc.stderr.read() if proc.poll() is not None else "timed out"
                    pytest.fail(f"esrerank serve did not come up: {detail}")
                time.sleep(0.1)
        yield port, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def bodies() -> list[dict]:
    titles = sorted({t.strip() for line in TITLES.read_text(encoding="utf-8").splitlines()
                     for t in line.split("\t")[1:] if t.strip()})
    rng = random.Random(8)
    out = []
    for i in range(REQUESTS):
        docs = rng.sample(titles, rng.randint(20, 100))
        body: dict = {"query": rng.choice(titles), "documents": docs, "top_n": 10 if i % 5 == 0 else None}
        if i % 2 == 0:
            body["first_stage_scores"] = [round(rng.uniform(0, 20), 3) for _ in docs]
        body = {k: v for k, v in body.items() if v is not None}
        out.append(body)
    return out


def _path(i: int) -> str:
    return "/v1/rerank?score=linear" if i % 7 == 3 else "/v1/rerank"


class _Connections(threading.local):
    conn: http.client.HTTPConnection | None = None


@pytest.mark.slow
def test_2000_requests_at_concurrency_16_answer_as_alone(server, bodies, exported):
    port, process = server
    local = _Connections()
    payloads = [json.dumps(_body_for(i, b)).encode() for i, b in enumerate(bodies)]

    def send(i: int) -> tuple[int, int, bytes]:
        if local.conn is None:
            local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        local.conn.request("POST", _path(i), body=payloads[i], headers={"Content-Type": "application/json"})
        resp = local.conn.getresponse()
        return i, resp.status, resp.read()

    warm = [send(i) for i in range(50)]  # one connection, one at a time: the server is warm
    rss_before = process.memory_info().rss
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        answers = list(pool.map(send, range(REQUESTS)))
    rss_after = process.memory_info().rss
    statuses = {}
    for _, status, _ in answers + warm:
        statuses[status] = statuses.get(status, 0) + 1
    assert statuses == {200: REQUESTS + 50}, statuses

    alone = create_app(ModelDirectory.load(exported["bow-cnn"], threads=1)).test_client()
    for i, _, data in answers:
        expected = alone.post(_path(i), data=payloads[i], content_type="application/json")
        assert json.loads(data) == expected.json, f"request {i} differs from the same request sent alone"
    growth_mb = (rss_after - rss_before) / 2**20
    print(f"\nserver RSS {rss_before / 2**20:.0f} MB -> {rss_after / 2**20:.0f} MB "
          f"({growth_mb:+.1f} MB over {REQUESTS} requests at concurrency {CONCURRENCY})")
    assert growth_mb < MAX_RSS_GROWTH_MB


def _body_for(i: int, body: dict) -> dict:
    """score=linear takes no first-stage scores."""
    if _path(i).endswith("linear"):
        return {k: v for k, v in body.items() if k != "first_stage_scores"}
    return body


@pytest.mark.slow
def test_slow_clients_do_not_stop_normal_requests(server, bodies):
    port, _ = server
    slow = []
    for _ in range(110):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"POST /v1/rerank HTTP/1.1\r\nHost: x\r\n")
        slow.append(sock)
    stop = threading.Event()
    dropped: list[float] = []
    start = time.monotonic()

    def trickle() -> None:  # one more header byte per client every 0.2 s, until stopped or dropped
        alive = list(slow)
        while alive and not stop.wait(0.2):
            for sock in list(alive):
                try:
                    sock.send(b"x")
                except OSError:
                    alive.remove(sock)
                    dropped.append(time.monotonic() - start)

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        latencies = []
        for i in range(20):
            body = json.dumps(_body_for(1, bodies[i])).encode()
            t0 = time.monotonic()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("POST", "/v1/rerank", body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200
            resp.read()
            conn.close()
            latencies.append(time.monotonic() - t0)
        # Answered while 110 slow clients hold connections: a request queued behind them would wait for
        # their drop (REQUEST_TIMEOUT); 2 s of that is slack for a loaded 2-core machine.
        assert max(latencies) < REQUEST_TIMEOUT - 2.0, latencies
        thread.join(timeout=REQUEST_TIMEOUT + 8)  # every slow client is dropped once its request is late
        assert len(dropped) == 110, len(dropped)
        assert min(dropped) >= REQUEST_TIMEOUT - 0.5 and max(dropped) < REQUEST_TIMEOUT + 6, dropped
    finally:
        stop.set()
        for sock in slow:
            sock.close()
