"""The sidecar's CPU per request against bare onnxruntime on the same graph, in one run.

What a request costs the machine, not how long it waits: CPU seconds, so the figures hold on a machine
that other work shares better than wall time does. For the packaged MiniLM's fp32 and int8 exports
(``serving.transformer_exports``: the same directories ``benchmarks/serving.py`` builds) and two kinds
of text (101 AskUbuntu titles: what one uncached rerank of 100 encodes; SemEval title + HTML body):

- **bare onnxruntime**, in this process, one intra-op thread, the graph's own feed (tokenising not
  counted): one run per text; length-sorted batches of 32 (the issue's reference); and the sidecar's
  schedule (``ModelDirectory.runs``: runs of one feed shape, never a text alone, ``serving.encode_schedule``);
- **the sidecar**: ``esrerank serve --cache-size 0 --onnx-threads 1`` (every text encoded, as a new
  window would be), ``/v1/rerank`` of a query and 100 documents, at concurrency 1 and 16: the server
  process's CPU seconds (``/proc/PID/stat``, every thread) over the requests, divided by their number,
  and the wall p50 / p95.

The target (issue 46): the sidecar's CPU per rerank of 101 titles at most 1.1× bare onnxruntime's
length-sorted batches of the same texts on the same graph, fp32 and int8. Min and median of the rounds.

Usage: ``python benchmarks/encode_cpu.py [--quick]``; writes ``benchmarks/encode_cpu.json``
(``--quick``: ``build/encode_cpu_quick.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from _machine import load_average, machine
from serving import transformer_exports
from sidecar import CANDIDATES, Sidecar, _request, askubuntu_titles, bodies, load

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving.encode_schedule import BATCHED, plan
from es_plugin_bridge.serving.model_dir import ModelDirectory

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def windows(kind: str, n: int) -> list[list[dict[str, str]]]:
    """``n`` rerank windows of 1 + 100 texts: titles, or title + body."""
    if kind == "titles":
        return [[{"title": t, "body": ""} for t in askubuntu_titles(CANDIDATES + 1, seed=300 + i)]
                for i in range(n)]
    return [[{"title": b["query"]["title"], "body": b["query"]["body"]}, *b["documents"]]
            for b in bodies(n, seed=7)]


def bare(model_dir: Path, texts: list[list[dict[str, str]]], rounds: int) -> dict[str, Any]:
    """CPU seconds per window of onnxruntime alone: per text, length-sorted batches of 32, the sidecar's
    schedule."""
    model = ModelDirectory.load(model_dir, threads=1, batch_size=64)
    encoded = [model.inputs.encode([Question(str(i), t["title"], t.get("body", "")) for i, t in enumerate(w)])
               for w in texts]

    def per_text(e: list) -> None:
        for row in e:
            model.run_feed([row])

    def sorted_32(e: list) -> None:
        lengths = [sum(len(part) for part in row) for row in e]
        for run in plan([None] * len(e), lengths, BATCHED, 32):
            model.run_feed([e[i] for i in run.feed])

    def schedule(e: list) -> None:
        for run in model.runs(e):
            model.run_feed([e[i] for i in run.feed])

    out: dict[str, Any] = {"schedule": model.schedule}
    for name, fn in (("per_text", per_text), ("sorted_32", sorted_32), ("sidecar_schedule", schedule)):
        fn(encoded[0])  # warm-up
        per_round = []
        for _ in range(rounds):
            start = time.process_time()
            for e in encoded:
                fn(e)
            per_round.append(1000 * (time.process_time() - start) / len(encoded))
        out[f"{name}_cpu_ms"] = {"min": round(min(per_round), 2),
                                 "median": round(float(np.median(per_round)), 2)}
    return out


def served(model_dir: Path, texts: list[list[dict[str, str]]], rounds: int) -> dict[str, Any]:
    """The sidecar's CPU per ``/v1/rerank`` of each window, and its wall latency, at concurrency 1 and 16."""
    payloads = [_request(json.dumps({"query": w[0], "documents": w[1:]}).encode()) for w in texts]
    # 16 clients of title + body windows wait longer than the default deadline and queue: both widened,
    # so every request is computed and counted (the bounds are measured by benchmarks/sidecar_load.py).
    sidecar = Sidecar(model_dir, "--cache-size", "0", "--onnx-threads", "1", "--max-queue", "64",
                      "--deadline-ms", "600000")
    out: dict[str, Any] = {}
    try:
        load(sidecar.port, payloads[:2], 1, 2, "warm-up")
        for concurrency in (1, 16):
            cpu, walls = [], []
            for _ in range(rounds):
                before = process_cpu(sidecar.proc.pid)
                got = load(sidecar.port, payloads, concurrency, len(payloads), f"c={concurrency}")
                cpu.append(1000 * (process_cpu(sidecar.proc.pid) - before) / len(payloads))
                walls.append(got)
                assert got["errors"] == 0, got
            out[f"concurrency_{concurrency}"] = {
                "cpu_ms_per_request": {"min": round(min(cpu), 2), "median": round(float(np.median(cpu)), 2)},
                "p50_ms": round(float(np.median([w["p50_ms"] for w in walls])), 1),
                "p95_ms": round(float(np.median([w["p95_ms"] for w in walls])), 1)}
    finally:
        sidecar.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer windows and rounds (a smoke run)")
    parser.add_argument("--models", type=Path, default=ROOT / "runs" / "bench")
    args = parser.parse_args()
    n, rounds = (4, 1) if args.quick else (12, 3)
    fp32, int8 = transformer_exports(args.models)
    loads = [load_average()]
    results: dict[str, Any] = {}
    for kind in ("titles", "title_body"):
        texts = windows(kind, n)
        for name, directory in (("fp32", fp32), ("int8", int8)):
            row = {"bare": bare(directory, texts, rounds), "sidecar": served(directory, texts, rounds)}
            reference = row["bare"]["sorted_32_cpu_ms"]["min"]
            row["ratio_sidecar_c1_to_sorted_32"] = round(
                row["sidecar"]["concurrency_1"]["cpu_ms_per_request"]["min"] / reference, 2)
            row["ratio_sidecar_c16_to_sorted_32"] = round(
                row["sidecar"]["concurrency_16"]["cpu_ms_per_request"]["min"] / reference, 2)
            row["ratio_per_text_to_sorted_32"] = round(row["bare"]["per_text_cpu_ms"]["min"] / reference, 2)
            results[f"{kind}/{name}"] = row
            loads.append(load_average())
            bare_ms, side = row["bare"], row["sidecar"]
            print(f"{kind:10s} {name}: bare per-text {bare_ms['per_text_cpu_ms']['min']:7.1f} ms, sorted-32 "
                  f"{reference:7.1f} ms, sidecar schedule "
                  f"{bare_ms['sidecar_schedule_cpu_ms']['min']:7.1f} ms | "
                  f"sidecar CPU/request c=1 {side['concurrency_1']['cpu_ms_per_request']['min']:7.1f} ms "
                  f"({row['ratio_sidecar_c1_to_sorted_32']}x), c=16 "
                  f"{side['concurrency_16']['cpu_ms_per_request']['min']:7.1f} ms "
                  f"({row['ratio_sidecar_c16_to_sorted_32']}x), p50 c=1 {side['concurrency_1']['p50_ms']} ms",
                  flush=True)
    report = {"machine": machine(), "load_average": loads, "windows": n, "rounds": rounds,
              "command": "python benchmarks/encode_cpu.py" + (" --quick" if args.quick else ""),
              "target": "sidecar CPU per rerank of 101 titles <= 1.1x bare onnxruntime sorted batches of 32",
              "results": results}
    out = ROOT / "build" / "encode_cpu_quick.json" if args.quick else HERE / "encode_cpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
