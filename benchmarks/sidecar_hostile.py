"""The sidecar against hostile bodies: every size cap holds for every shape, in milliseconds, and its
memory stays bounded (issue 48, item 2 and its "Done when").

Before: one ``/v2/embed`` item of 200 content parts × 99,999 characters (20 MB, under ``--max-body-mb
32``) got past the per-part 100,000-character cap, answered 200 after 243 s, and the sidecar's RSS went
274 MB → 1.87 GB and stayed there; two 5 MB requests made a one-text probe wait 43.8 s.

Here ``esrerank serve MODEL`` runs with its defaults and receives, one after the other, the bodies in
``HOSTILE`` (each the largest of its shape under the body cap, or just over a cap), then two of the
largest *accepted* bodies at once beside a one-title probe. A thread samples the server's RSS every
20 ms. Reported per body: status, the answer's ``field`` and seconds; the probe's latency; RSS at the
start, at its peak and at the end. The bound stated (``RSS_BOUND_MB``): the peak stays within that many
MB over the warm server's RSS.

Usage: ``python benchmarks/sidecar_hostile.py [--model DIR] [--out FILE]``; writes
``benchmarks/sidecar_hostile.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from _machine import machine

from es_plugin_bridge.local_http import free_port, wait_until_ready

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RSS_BOUND_MB = 600
LONG = ("sudo apt-get install -y nvidia-driver && grep -rn 'EE' /var/log/Xorg.0.log | tail -n 40 ; "
        * 1200)[:99_999]  # a shell snippet of 99,999 characters, as AskUbuntu bodies paste them


def _nested(depth: int) -> bytes:
    return b'{"texts": ' + b"[" * depth + b"]" * depth + b"}"


#: (name, path, body): the largest body of each shape the caps let through, or one just past a cap.
HOSTILE: list[tuple[str, str, bytes]] = [
    ("v2/embed: one item, 200 parts × 99,999 chars (20 MB)", "/v2/embed",
     json.dumps({"model": "m", "input_type": "search_document", "embedding_types": ["float"],
                 "inputs": [{"content": [{"type": "text", "text": LONG}] * 200}]}).encode()),
    ("v2/embed: one item, 101 one-word parts", "/v2/embed",
     json.dumps({"model": "m", "input_type": "search_document", "embedding_types": ["float"],
                 "inputs": [{"content": [{"type": "text", "text": "grub"}] * 101}]}).encode()),
    ("v1/rerank: 300 documents × 99,999 chars (30 MB)", "/v1/rerank",
     json.dumps({"query": "grub rescue after update", "documents": [LONG] * 300}).encode()),
    ("v1/embed: 300 texts × 99,999 chars (30 MB)", "/v1/embed",
     json.dumps({"texts": [LONG] * 300}).encode()),
    ("v1/encode: one title of 100,001 chars", "/v1/encode",
     json.dumps({"texts": [{"title": "x" * 100_001}]}).encode()),
    ("v1/rerank: 1,001 documents (over --max-documents)", "/v1/rerank",
     json.dumps({"query": "wifi", "documents": ["wifi drops"] * 1001}).encode()),
    # 413 once the length is read; the connection lingers while the client sends the rest (status 0
    # before the lingering close: the server's reset destroyed the answer)
    ("v1/embed: 33 MB body (over --max-body-mb)", "/v1/embed",
     json.dumps({"texts": ["a" * 99_000] * 350}).encode()),
    ("v1/embed: JSON nested 100,000 deep", "/v1/embed", _nested(100_000)),
    ("v1/embed: invalid UTF-8", "/v1/embed", b'{"texts": ["\xff\xfe grub"]}'),
    ("v1/text-pair: 99,999-char query and text", "/v1/text-pair",
     json.dumps({"inputs": {"text": LONG, "text_pair": LONG}}).encode()),
]
PROBE = ("/v1/embed", json.dumps({"texts": ["How do I reinstall grub from a live USB?"]}).encode())


class RssSampler(threading.Thread):
    """The server's resident memory every 20 ms, so a short peak is seen."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()

    def rss(self) -> int:
        return self.process.memory_info().rss

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(0.02)


def post(port: int, path: str, body: bytes) -> dict[str, Any]:
    """One request on its own connection: status, the answer's ``field`` or message, seconds."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.monotonic()
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        status = resp.status
    except (OSError, http.client.HTTPException) as err:  # the server may close on an oversize body
        data, status = str(err).encode(), 0
    finally:
        conn.close()
    seconds = round(time.monotonic() - started, 3)
    try:
        answer = json.loads(data)
    except ValueError:
        answer = {}
    said = answer.get("field") or answer.get("error") or answer.get("message") if isinstance(answer, dict) \
        else None
    return {"status": status, "said": str(said)[:160] if said else None, "seconds": seconds,
            "body_mb": round(len(body) / 2**20, 2)}


def run(model: Path) -> dict[str, Any]:
    port = free_port()
    exe = Path(sys.executable).with_name("esrerank")
    server = subprocess.Popen([str(exe), "serve", str(model), "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_ready(f"http://127.0.0.1:{port}/readyz", timeout=120, alive=lambda: server.poll() is None)
        for _ in range(5):
            post(port, *PROBE)  # warm
        sampler = RssSampler(server.pid)
        start_rss = sampler.rss()
        sampler.start()
        answers = {}
        for name, path, body in HOSTILE:
            answers[name] = post(port, path, body)
            print(f"{name:60} {answers[name]}", flush=True)
        alone = min(post(port, *PROBE)["seconds"] for _ in range(5))
        largest = max((h for h in HOSTILE if answers[h[0]]["status"] == 200), key=lambda h: len(h[2]),
                      default=None)
        beside = None
        if largest is not None:
            with ThreadPoolExecutor(3) as pool:
                heavy = [pool.submit(post, port, largest[1], largest[2]) for _ in range(2)]
                time.sleep(0.2)
                beside = post(port, *PROBE)["seconds"]
                heavy_answers = [f.result() for f in heavy]
        sampler.stop.set()
        sampler.join()
        end_rss = sampler.rss()
    finally:
        server.terminate()
        server.wait(timeout=30)
    growth = (sampler.peak - start_rss) / 2**20
    return {
        "answers": answers,
        "probe_alone_s": alone,
        "probe_beside_two_largest_accepted": {"largest": largest[0] if largest else None,
                                              "probe_s": beside,
                                              "heavy": heavy_answers if largest else None},
        "rss_mb": {"start": round(start_rss / 2**20), "peak": round(sampler.peak / 2**20),
                   "end": round(end_rss / 2**20)},
        "rss_bound_mb": RSS_BOUND_MB, "peak_growth_mb": round(growth), "within_bound": growth <= RSS_BOUND_MB,
        "no_5xx": all(a["status"] < 500 for a in answers.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "runs" / "bench" / "minilm-onnx",
                        help="an exported model directory (default: MiniLM fp32, as benchmarks/serving.py "
                             "builds it)")
    parser.add_argument("--out", type=Path, default=HERE / "sidecar_hostile.json")
    args = parser.parse_args()
    report = {"machine": machine(model=str(args.model)), **run(args.model)}
    for key in ("probe_alone_s", "probe_beside_two_largest_accepted", "rss_mb", "peak_growth_mb",
                "within_bound", "no_5xx"):
        print(f"{key:28} {report[key]}")
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
