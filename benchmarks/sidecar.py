"""Latency of the sidecar: ``POST /v1/rerank`` over real HTTP (``esrerank serve``, waitress) against the
same request scored in process, for windows of 10 and 100 real AskUbuntu titles.

Elasticsearch calls the sidecar once per query in its rescoring step, so the per-request latency at
the window size is what a search pays. The in-process time is the model's own cost (tokenise,
onnxruntime, cosine); the ratio HTTP / in-process is the serving overhead, measured in the same run.

Usage: ``python benchmarks/sidecar.py [--model runs/demo/model-onnx] [--requests 200]``
(``make demo`` writes ``runs/demo/model-onnx``). Prints a table and writes ``benchmarks/sidecar.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
from _machine import machine
from tqdm import tqdm

HERE = Path(__file__).resolve().parent
TITLES = HERE.parent / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "train_titles.tsv"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(base: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"esrerank serve exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit("esrerank serve did not come up within 60 s")


def percentiles(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p95_ms": round(float(np.percentile(ms, 95)), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=HERE.parent / "runs" / "demo" / "model-onnx")
    parser.add_argument("--requests", type=int, default=200, help="requests per window size")
    parser.add_argument("--windows", default="10,100")
    args = parser.parse_args()
    if not (args.model / "manifest.json").is_file():
        sys.exit(f"{args.model}: no exported model directory; run `make demo` or `esrerank export-onnx`")

    from es_plugin_bridge.serving.app import create_app
    from es_plugin_bridge.serving.model_dir import ModelDirectory
    from es_plugin_bridge.serving.schemas import RerankRequest

    titles = sorted({t.strip() for line in TITLES.read_text().splitlines() for t in line.split("\t")[1:]})
    rng = random.Random(1)
    service = create_app(ModelDirectory.load(args.model, threads=1)).extensions["esrerank"]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    exe = Path(sys.executable).with_name("esrerank")
    proc = subprocess.Popen(
        [str(exe), "serve", str(args.model), "--port", str(port), "--onnx-threads", "1", "--threads", "1"],
        stderr=subprocess.DEVNULL,
    )
    results = {}
    try:
        wait_up(base, proc)
        for window in (int(w) for w in args.windows.split(",")):
            bodies = []
            for _ in range(args.requests):
                docs = rng.sample(titles, window)
                bodies.append(
                    {
                        "query": rng.choice(titles),
                        "documents": docs,
                        "first_stage_scores": [rng.uniform(0, 20) for _ in docs],
                    }
                )
            local, http = [], []
            for body in tqdm(bodies, desc=f"window {window}", leave=False):
                t0 = time.perf_counter()
                service.rerank(RerankRequest.model_validate(body))
                local.append(1000 * (time.perf_counter() - t0))
                data = json.dumps(body).encode()
                req = urllib.request.Request(
                    base + "/v1/rerank", data=data, headers={"Content-Type": "application/json"}
                )
                t0 = time.perf_counter()
                with urllib.request.urlopen(req, timeout=30) as resp:
                    resp.read()
                http.append(1000 * (time.perf_counter() - t0))
            results[str(window)] = {
                "in_process": percentiles(local),
                "http": percentiles(http),
                "http_over_in_process_p50": round(float(np.median(http) / np.median(local)), 3),
                "docs_per_second_http": round(window * len(http) / (sum(http) / 1000), 1),
            }
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(
        f"{'window':>6} {'in-process p50/p95 ms':>22} {'HTTP p50/p95 ms':>18} {'HTTP/in-process':>16} docs/s"
    )
    for window, r in results.items():
        print(
            f"{window:>6} {r['in_process']['p50_ms']:>11.2f} / {r['in_process']['p95_ms']:<8.2f} "
            f"{r['http']['p50_ms']:>8.2f} / {r['http']['p95_ms']:<7.2f} "
            f"{r['http_over_in_process_p50']:>16.2f} "
            f"{r['docs_per_second_http']:.0f}"
        )
    report = {
        "command": shlex.join(["python", *sys.argv]),
        "machine": machine(onnx_threads=1, http_threads=1),
        "model": str(args.model),
        "requests_per_window": args.requests,
        "results": results,
    }
    (HERE / "sidecar.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
