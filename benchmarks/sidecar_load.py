"""The sidecar under more load than it can take: 32 clients reranking windows of 100 real AskUbuntu titles.

Issue 48, item 3: 32 clients × 100 titles on ``/v1/rerank`` all got 200, p50 24.8 s and p95 36.5 s, long
after ml-commons' connector had stopped waiting (``read_timeout`` 5 s), and the sidecar computed every
window anyway. Here ``esrerank serve MODEL`` runs with its defaults (the bounded queue: 64 × threads;
the default deadline 4.5 s) and each client behaves as the connector does: it sends its deadline
(``X-Request-Timeout-Ms``: its 5 s timeout less a margin), stops waiting at 5 s, and on a 503 with
``Retry-After`` waits that long before its next request. Each window is drawn at random from 100,000+
titles, so nearly every candidate is a cache miss (a cold cache, the costly case).

Reported: answers by status, p50 / p95 of the 200s and of every answer, how many 200s came after their
deadline (must be 0), how many were refused with ``Retry-After`` and how many the client gave up on,
and from the sidecar's ``/metrics`` the work dropped by stage; ``computed_for_nobody`` (windows computed
whole for a client whose deadline had passed or who had gone: ``finished_late``) must be 0 too.

Usage: ``python benchmarks/sidecar_load.py [--model DIR] [--duration 60 | --quick] [--documents 100]
[--serve-arg=--max-queue=64 ...] [--out FILE]``. Prints the figures and writes
``benchmarks/sidecar_load.json`` (or ``--out``). With a tiny model a window of 100 titles costs ~50 ms,
so the deadline only bites with longer windows and a longer queue
(``--documents 1000 --serve-arg=--max-queue=64``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine

from es_plugin_bridge.local_http import free_port, wait_until_ready
from es_plugin_bridge.request_deadline import HEADER, header_value

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TITLES = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "train_titles.tsv"
CLIENT_TIMEOUT_S = 5.0  # ml-commons' connector read_timeout (elastic/modes/rerank.py CLIENT_CONFIG)


def titles() -> list[str]:
    """Every distinct title of the AskUbuntu training pairs."""
    out = set()
    for line in TITLES.read_text(encoding="utf-8").splitlines():
        out.update(part for part in line.split("\t")[1:3] if part.strip())
    return sorted(out)


class Client(threading.Thread):
    """One connector-like client: windows of ``documents`` titles until ``stop_at``."""

    def __init__(self, port: int, pool: list[str], documents: int, stop_at: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.port, self.pool, self.documents, self.stop_at = port, pool, documents, stop_at
        self.random = random.Random(seed)
        self.answers: list[tuple[int, float, bool]] = []  # (status, seconds, had Retry-After)
        self.gave_up = 0

    def run(self) -> None:
        conn: http.client.HTTPConnection | None = None
        headers = {"Content-Type": "application/json", HEADER: header_value(CLIENT_TIMEOUT_S)}
        while time.monotonic() < self.stop_at:
            window = self.random.sample(self.pool, self.documents + 1)
            body = json.dumps({"query": window[0], "documents": window[1:]}).encode()
            conn = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=CLIENT_TIMEOUT_S)
            started = time.monotonic()
            try:
                conn.request("POST", "/v1/rerank", body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                retry = resp.getheader("Retry-After")
                self.answers.append((resp.status, time.monotonic() - started, retry is not None))
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
                if retry is not None:
                    time.sleep(min(float(retry), max(0.0, self.stop_at - time.monotonic())))
            except (TimeoutError, OSError, http.client.HTTPException):
                self.gave_up += 1  # as the connector does at its read_timeout: the connection is dropped
                conn.close()
                conn = None
        if conn is not None:
            conn.close()


def scrape(port: int) -> dict[str, float]:
    """The sidecar's counters this benchmark reports (``/metrics``)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("esrerank_work_dropped_total", "esrerank_requests_rejected_total",
                            "esrerank_encoding_cache_misses_total", "esrerank_requests_total")):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def run(model: Path, duration: float, clients: int, documents: int, serve_args: list[str]) -> dict[str, Any]:
    port = free_port()
    log = HERE / "sidecar_load.log"
    exe = Path(sys.executable).with_name("esrerank")
    with log.open("w", encoding="utf-8") as out:
        server = subprocess.Popen([str(exe), "serve", str(model), "--port", str(port), *serve_args],
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until_ready(f"http://127.0.0.1:{port}/readyz", timeout=60, alive=lambda: server.poll() is None)
        pool = titles()
        stop_at = time.monotonic() + duration
        threads = [Client(port, pool, documents, stop_at, seed) for seed in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(duration + 2 * CLIENT_TIMEOUT_S)
        time.sleep(1.0)  # the last dropped requests reach the counters
        metrics = scrape(port)
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.unlink(missing_ok=True)
    answers = [a for t in threads for a in t.answers]
    ok = [s for status, s, _ in answers if status == 200]
    deadline_s = int(header_value(CLIENT_TIMEOUT_S)) / 1000
    dropped = {k.split('stage="')[1].split('"')[0]: v for k, v in metrics.items()
               if k.startswith("esrerank_work_dropped_total")}
    statuses: dict[str, int] = {}
    for status, _, _ in answers:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    return {
        "clients": clients, "documents": documents, "duration_s": duration, "serve_args": serve_args,
        "client_timeout_s": CLIENT_TIMEOUT_S, "deadline_header_ms": int(header_value(CLIENT_TIMEOUT_S)),
        "answers": len(answers), "statuses": statuses,
        "p50_ok_s": percentile(ok, 50), "p95_ok_s": percentile(ok, 95),
        "p50_all_s": percentile([s for _, s, _ in answers], 50),
        "p95_all_s": percentile([s for _, s, _ in answers], 95),
        "ok_after_deadline": sum(s > deadline_s for s in ok),
        "slowest_ok_s": round(max(ok), 3) if ok else None,
        "rejected_with_retry_after": sum(1 for status, _, retry in answers if status in (429, 503) and retry),
        "client_gave_up": sum(t.gave_up for t in threads),
        "dropped_by_stage": dropped,
        "computed_for_nobody": dropped.get("finished_late", 0.0),
        "windows_per_s": round(len(ok) / duration, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "runs" / "demo" / "model-onnx",
                        help="an exported model directory (default: the demo's)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--quick", action="store_true", help="10 seconds of load")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--serve-arg", action="append", default=[], metavar="ARG",
                        help="an esrerank serve option (repeatable), e.g. --serve-arg=--max-queue=64")
    parser.add_argument("--out", type=Path, default=HERE / "sidecar_load.json")
    args = parser.parse_args()
    duration = 10.0 if args.quick else args.duration
    result = run(args.model, duration, args.clients, args.documents, args.serve_arg)
    report = {"machine": machine(model=str(args.model)), **result}
    for key, value in result.items():
        print(f"{key:28} {value}")
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
