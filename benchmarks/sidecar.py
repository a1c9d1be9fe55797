"""The sidecar's speed, measured in one run: in process against the compute floor and PyTorch, over HTTP
under load, the thread settings behind ``esrerank serve``'s defaults, and the memory of a large vocabulary.

For each exported model (``--model DIR``, with its training checkpoint ``--checkpoint DIR`` for the PyTorch
comparison; default: the demo's ``runs/demo/model-onnx`` and ``runs/demo/model``), 100 real title+body
candidates (SemEval-2016 dev questions) for one real query:

- in process (``Service.rerank_json``, what the HTTP handler runs): uncached (cache cleared before each
  call) against the bare onnxruntime call on the same batch — the compute floor (target ≤ 1.25×) —
  against PyTorch eager on that batch (target: ONNX ≥ 1.5× faster), and fully cached (target p50 ≤ 1 ms);
- over HTTP on loopback (``esrerank serve`` in a subprocess, a keep-alive load generator in this
  process): p50 and p99 at concurrency 1 and 16 with cached candidates (targets at 16 on 2 cores: p50 ≤
  5 ms, p99 ≤ 25 ms), requests per second, errors over 10,000 requests;
- request threads × onnxruntime intra-op threads at concurrency 16, cached and uncached (the defaults);
- peak RSS of the serving process for a large vocabulary (``--big-vocab DIR``; target ≤ 400 MB);
- for a transformer, with ``--st-floor DIR`` (a sentence-transformers model of the same architecture,
  e.g. the shipped all-MiniLM-L6-v2): uncached rerank of 100 AskUbuntu titles over HTTP (cache off)
  against sentence-transformers ``encode`` of the same 101 raw texts in this process, p50/p99 at
  concurrency 1 and 16 and texts/s (``--only-st-floor`` runs this alone). ``benchmarks/serving.py``
  measures the transformer against both peers of issue 15 (this floor and infinity-emb) in one run.

Usage: ``python benchmarks/sidecar.py [--model DIR --checkpoint DIR]... [--big-vocab DIR]
[--requests 10000]``. Prints the figures and writes ``benchmarks/sidecar.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine
from tqdm import tqdm

from es_plugin_bridge.local_http import NotReady, free_port, wait_until_ready

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SEMEVAL_DEV = ROOT / "es_plugin_bridge" / "samples" / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
CANDIDATES = 100


# -- data -----------------------------------------------------------------------------------------
def semeval_questions() -> tuple[list[Any], list[Any]]:
    """(the 50 original questions, the 500 related questions): real titles with real HTML bodies."""
    from es_plugin_bridge.data.spec import read_spec

    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries
    return [rq.query for rq in queries], [c for rq in queries for c in rq.candidates]


def bodies(n: int, seed: int) -> list[dict]:
    """``n`` rerank bodies: a real query and 100 real candidates each, with first-stage scores."""
    queries, pool = semeval_questions()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        docs = rng.sample(pool, CANDIDATES)
        out.append({"query": _doc(rng.choice(queries)), "documents": [_doc(d) for d in docs],
                    "first_stage_scores": [round(rng.uniform(0, 20), 3) for _ in docs]})
    return out


def _doc(q: Any) -> dict:
    return {"id": q.id, "title": q.title, "body": q.body}


def stats(ms: Sequence[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50_ms": round(float(np.percentile(a, 50)), 3), "p95_ms": round(float(np.percentile(a, 95)), 3),
            "p99_ms": round(float(np.percentile(a, 99)), 3), "n": len(a)}


def timed(fn: Callable[[], Any], repeat: int, before: Callable[[], Any] | None = None) -> list[float]:
    out = []
    for _ in range(repeat):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        out.append(1000 * (time.perf_counter() - t0))
    return out


# -- in process -----------------------------------------------------------------------------------
def in_process(model_dir: Path, checkpoint: Path | None, repeat: int) -> dict[str, Any]:
    """The ratios are measured round-robin (floor, uncached, PyTorch in turn, ``repeat`` rounds), so a
    change in the machine's load touches all three alike."""
    from es_plugin_bridge.serving.model_dir import ModelDirectory
    from es_plugin_bridge.serving.schemas import RerankRequest
    from es_plugin_bridge.serving.service import Service, _question

    model = ModelDirectory.load(model_dir, threads=1, batch_size=128)
    service = Service(model)
    req = RerankRequest.model_validate(bodies(1, seed=7)[0])
    questions = [_question(req.query), *[_question(d) for d in req.documents]]
    feed = model.inputs.feed(model.inputs.encode(questions))
    output = [model.config.output]
    runners: dict[str, Callable[[], Any]] = {
        "onnx_floor": lambda: model.session.run(output, feed),
        "uncached": lambda: (service.cache.clear(), service.rerank_json(req)),
    }
    if checkpoint is not None and (checkpoint / "config.json").is_file():
        runners["torch_eager"] = torch_eager(checkpoint, questions, fixed=not model.config.dynamic_length)
    times: dict[str, list[float]] = {name: [] for name in runners}
    for run in runners.values():
        run()  # warm-up (allocations, the stemmer's cache)
    for _ in range(repeat):
        for name, run in runners.items():
            start = time.perf_counter()
            run()
            times[name].append(1000 * (time.perf_counter() - start))
    service.rerank_json(req)
    cached = timed(lambda: service.rerank_json(req), repeat * 10)
    floor = np.median(times["onnx_floor"])
    out: dict[str, Any] = {
        "batch": len(questions),
        "input_shape": [len(questions), *(int(v.shape[1]) for k, v in feed.items() if "ids" in k)],
        **{name: stats(ms) for name, ms in times.items()}, "cached": stats(cached),
        "uncached_over_floor_p50": round(float(np.median(times["uncached"]) / floor), 3),
    }
    if "torch_eager" in times:
        out["torch_over_onnx_p50"] = round(float(np.median(times["torch_eager"]) / floor), 3)
    return out


def torch_eager(checkpoint: Path, questions: list[Any], fixed: bool) -> Callable[[], Any]:
    """The checkpoint's encoder in PyTorch eager mode (one thread, inference mode) on the same batch:
    padded to the caps when the exported graph has static lengths (``fixed``), as onnxruntime gets it."""
    import torch

    from es_plugin_bridge.training.families import Probe, family_of
    from exporters.export import load_source

    torch.set_num_threads(1)
    model, featurizer, _ = load_source(checkpoint)
    model.eval()
    batch = family_of(model.model_type).probe_feed(featurizer, Probe("benchmark", questions, fixed))

    def run() -> Any:
        with torch.inference_mode():
            return model.encode(**batch)

    return run


# -- a transformer against sentence-transformers in process ----------------------------------------
def askubuntu_titles(n: int, seed: int) -> list[str]:
    path = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "train_titles.tsv"
    lines = path.read_text(encoding="utf-8").splitlines()
    titles = sorted({t.strip() for line in lines for t in line.split("\t")[1:] if t.strip()})
    return random.Random(seed).sample(titles, n)


def st_floor(model_dir: Path, st_dir: Path, total: int, onnx_threads: int) -> dict[str, Any]:
    """Uncached rerank of 100 titles over HTTP vs sentence-transformers ``encode`` of the same texts.

    Every request carries a query and 100 titles; the sidecar runs with ``--cache-size 0`` so each one
    is encoded, as a new window would be. The floor encodes the same 101 raw strings in one call
    (batch 128, torch on every core, the model's max_length), with no HTTP, JSON or scoring around it.
    """
    import torch
    from sentence_transformers import SentenceTransformer

    config = json.loads((model_dir / "config.json").read_text())
    windows = [askubuntu_titles(CANDIDATES + 1, seed=100 + i) for i in range(40)]
    st = SentenceTransformer(str(st_dir), device="cpu")
    st.max_seq_length = config["tokenizer"]["max_length"]
    timed(lambda: st.encode(windows[0], batch_size=128), repeat=5)  # warm-up
    floor = [timed(lambda w=w: st.encode(w, batch_size=128), repeat=1)[0] for w in windows]
    payloads = [_request(json.dumps({"query": w[0], "documents": w[1:]}).encode()) for w in windows]
    sidecar = Sidecar(model_dir, "--cache-size", "0", "--onnx-threads", str(onnx_threads))
    try:
        load(sidecar.port, payloads[:4], 1, 4, "warm-up")
        one = load(sidecar.port, payloads, 1, min(total, 200), "uncached c=1")
        sixteen = load(sidecar.port, payloads, 16, total, "uncached c=16")
    finally:
        sidecar.close()
    texts_per_s = round((CANDIDATES + 1) * 1000 / float(np.median(floor)), 1)
    return {
        "settings": {"sidecar": f"--cache-size 0 --onnx-threads {onnx_threads} --threads 2",
                     "sentence_transformers": "encode(batch_size=128), torch threads "
                                              f"{torch.get_num_threads()}, max_seq {st.max_seq_length}",
                     "sidecar_graph": config.get("verification", {}).get("quantized") or "fp32",
                     "st_model": str(st_dir)},
        "st_encode_101_texts_ms": stats(floor), "st_texts_per_second": texts_per_s,
        "http_uncached_concurrency_1": one, "http_uncached_concurrency_16": sixteen,
        "http_texts_per_second_concurrency_16": round(sixteen["requests_per_second"] * (CANDIDATES + 1), 1),
        "ratio_p50_http_c1_to_st": round(one["p50_ms"] / float(np.median(floor)), 2),
    }


# -- over HTTP ------------------------------------------------------------------------------------
class Sidecar:
    """``esrerank serve`` in a subprocess on a free local port."""

    def __init__(self, model_dir: Path, *options: str) -> None:
        self.port = free_port()
        exe = Path(sys.executable).with_name("esrerank")
        self.proc = subprocess.Popen([str(exe), "serve", str(model_dir), "--port", str(self.port), *options],
                                     stderr=subprocess.DEVNULL)
        try:
            wait_until_ready(f"http://127.0.0.1:{self.port}/readyz", timeout=120,
                             alive=lambda: self.proc.poll() is None)
        except NotReady as exc:
            sys.exit(f"esrerank serve {model_dir} did not come up: {exc}")

    def peak_rss_mb(self) -> float:
        """VmHWM: the most resident memory the process ever had."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
        return round(int(line.split()[1]) / 1024, 1)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _request(payload: bytes, path: str = "/v1/rerank") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload


def _exchange(sock: socket.socket, request: bytes) -> int:
    """Send one request on a keep-alive connection and read its whole answer; the status code."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        rest += chunk
    return int(head.split(b" ", 2)[1])


def load(port: int, requests: list[bytes], concurrency: int, total: int, desc: str,
         rate: float | None = None, keep: list[float] | None = None) -> dict[str, Any]:
    """``total`` requests (cycling through ``requests``) from ``concurrency`` keep-alive connections.

    Closed loop by default: each connection sends its next request as soon as the last is answered, so
    at saturation latency is concurrency / throughput (Little's law). With ``rate`` (requests a second)
    it is open loop: request i is due at ``i / rate`` and its latency counts from then (no coordinated
    omission), the latency a caller sees when the server is not saturated. ``keep`` receives every
    latency (ms), for a caller that pools them over several runs.
    """
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    counter = iter(range(total))
    bar = tqdm(total=total, desc=desc, leave=False)

    def worker() -> None:
        nonlocal errors
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        mine, bad = [], 0
        try:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    break
                t0 = time.perf_counter()
                if rate is not None:
                    due = start + i / rate
                    if due > t0:
                        time.sleep(due - t0)
                    t0 = due
                try:
                    status = _exchange(sock, requests[i % len(requests)])
                except OSError:
                    status = 0
                    sock.close()
                    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
                mine.append(1000 * (time.perf_counter() - t0))
                bad += status != 200
                bar.update(1)
        finally:
            sock.close()
            with lock:
                latencies.extend(mine)
                errors += bad

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    bar.close()
    if keep is not None:
        keep.extend(latencies)
    return {**stats(latencies), "requests": total, "errors": errors, "concurrency": concurrency,
            "offered_rate": rate, "requests_per_second": round(total / elapsed, 1)}


def over_http(model_dir: Path, total: int) -> dict[str, Any]:
    """Cached candidates (each body sent once before timing) at concurrency 1 and 16, default settings."""
    payloads = [_request(json.dumps(b).encode()) for b in bodies(50, seed=11)]
    sidecar = Sidecar(model_dir)
    try:
        load(sidecar.port, payloads, 1, len(payloads), "warm-up")
        one = load(sidecar.port, payloads, 1, min(total, 1000), "HTTP c=1")
        sixteen = load(sidecar.port, payloads, 16, total, "HTTP c=16")
        rate = round(0.5 * sixteen["requests_per_second"])  # half the saturated throughput
        paced = load(sidecar.port, payloads, 16, min(total, 15 * rate), f"HTTP c=16 at {rate}/s", rate=rate)
        return {"concurrency_1": one, "concurrency_16": sixteen, "concurrency_16_open_loop": paced,
                "server_peak_rss_mb": sidecar.peak_rss_mb()}
    finally:
        sidecar.close()


def thread_sweep(model_dir: Path, uncached_requests: int, cached_requests: int) -> list[dict[str, Any]]:
    """Request threads × onnxruntime intra-op threads at concurrency 16: what the defaults rest on."""
    uncached = [_request(json.dumps(b).encode()) for b in bodies(uncached_requests, seed=13)]
    cached = [_request(json.dumps(b).encode()) for b in bodies(20, seed=17)]
    rows = []
    for threads in (1, 2, 4, 8):
        for onnx_threads in (1, 2):
            options = ("--threads", str(threads), "--onnx-threads", str(onnx_threads))
            sidecar = Sidecar(model_dir, *options, "--cache-size", "0")
            try:
                label = f"t={threads} o={onnx_threads}"
                cold = load(sidecar.port, uncached, 16, len(uncached), f"{label} uncached")
            finally:
                sidecar.close()
            sidecar = Sidecar(model_dir, *options)
            try:
                load(sidecar.port, cached, 1, len(cached), "warm-up")
                warm = load(sidecar.port, cached, 16, cached_requests, f"{label} cached")
            finally:
                sidecar.close()
            rows.append({"threads": threads, "onnx_threads": onnx_threads, "uncached": cold, "cached": warm})
    return rows


def big_vocabulary(model_dir: Path, total: int) -> dict[str, Any]:
    """Peak RSS of ``esrerank serve`` (default settings) after ``total`` requests of fresh candidates."""
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    payloads = [_request(json.dumps(b).encode()) for b in bodies(200, seed=19)]
    sidecar = Sidecar(model_dir)
    try:
        idle = sidecar.peak_rss_mb()
        run = load(sidecar.port, payloads, 16, total, "large vocabulary")
        return {"model": str(model_dir), "vocab_size": vocab, "peak_rss_mb_after_load": idle,
                "peak_rss_mb": sidecar.peak_rss_mb(), "load": run}
    finally:
        sidecar.close()


def widen_vocabulary(checkpoint: Path, out: Path, size: int) -> Path:
    """The checkpoint with its vocabulary widened to ``size`` words, exported to ``out``/model-onnx.

    The shared data holds about 47,000 distinct words, so the new words are its real words (most frequent
    first) and then filler tokens; their embedding rows are random with the trained rows' spread. What is
    measured is memory, which depends on the vocabulary's size, not on what the rows learned.
    """
    from safetensors.numpy import load_file, save_file

    from es_plugin_bridge.core.vocab import Vocabulary
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.text import Preprocessor, TextOptions
    from exporters.export import export_checkpoint

    onnx_dir = out / "model-onnx"
    if (onnx_dir / "manifest.json").is_file():
        return onnx_dir
    config = json.loads((checkpoint / "config.json").read_text())
    vocab = Vocabulary.load(checkpoint / "vocab.json")
    preprocessor = Preprocessor(TextOptions.from_mapping(config["text"], source=str(checkpoint)))
    counts: dict[str, int] = {}
    shared = Path("/work/shared/data")
    specs = [f"pairs:{p}" for p in sorted(shared.glob("*/*.tsv"))] + [
        f"semeval:{p}" for p in sorted(shared.glob("semeval*/*.xml"))]
    for spec in specs if shared.is_dir() else []:
        for q in read_spec(spec).questions.values():
            for token in preprocessor.tokens(q):
                if token not in vocab:
                    counts[token] = counts.get(token, 0) + 1
    new = sorted(counts, key=lambda t: (-counts[t], t))[: size - len(vocab)]
    new += [f"zzfill{i:06d}" for i in range(size - len(vocab) - len(new))]
    wide = Vocabulary(vocab.tokens + new, [*vocab.counts, *(counts.get(t, 1) for t in new)],
                      [*vocab.doc_freqs, *(counts.get(t, 1) for t in new)], vocab.n_docs)
    weights = load_file(str(checkpoint / "model.safetensors"))
    rng = np.random.default_rng(0)
    for name, value in list(weights.items()):
        if value.shape[:1] == (len(vocab),):  # per-word tensors: the embedding and the BOW weights
            extra = (rng.normal(0, float(value.std()), (len(new), *value.shape[1:])) if value.ndim > 1
                     else np.full(len(new), float(value.mean())))
            weights[name] = np.concatenate([value, extra.astype(value.dtype)])
    widened = out / "checkpoint"
    widened.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(widened / "model.safetensors"))
    wide.save(widened / "vocab.json")
    config["model"]["vocab_size"] = size
    (widened / "config.json").write_text(json.dumps(config, indent=2))
    export_checkpoint(widened, onnx_dir)
    return onnx_dir


# -- report ---------------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, action="append",
                        help="exported model directory (repeatable; default runs/demo/model-onnx)")
    parser.add_argument("--checkpoint", type=Path, action="append",
                        help="its training checkpoint, for PyTorch eager (same order as --model)")
    parser.add_argument("--big-vocab", type=Path, help="an exported model with a large vocabulary (RSS; "
                        "default: the demo checkpoint widened to 50,000 words under runs/bench/vocab-50k)")
    parser.add_argument("--no-big-vocab", action="store_true", help="skip the large-vocabulary RSS")
    parser.add_argument("--requests", type=int, default=10_000, help="HTTP requests at concurrency 16")
    parser.add_argument("--repeat", type=int, default=30, help="in-process repetitions (cached: 10×)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the thread sweep")
    parser.add_argument("--st-floor", type=Path, help="a sentence-transformers model directory: the "
                        "in-process floor for each transformer --model")
    parser.add_argument("--only-st-floor", action="store_true", help="run only the --st-floor comparison")
    parser.add_argument("--onnx-threads", type=int, default=1, help="the sidecar's in the --st-floor runs")
    args = parser.parse_args()
    models = args.model or [ROOT / "runs" / "demo" / "model-onnx"]
    checkpoints = args.checkpoint or ([ROOT / "runs" / "demo" / "model"] if not args.model else [])
    checkpoints += [None] * (len(models) - len(checkpoints))
    for directory in models:
        if not (directory / "manifest.json").is_file():
            sys.exit(f"{directory}: no exported model directory; run `make demo` or `esrerank export-onnx`")
    report: dict[str, Any] = {
        "command": shlex.join(["python", *sys.argv]),
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "candidates": CANDIDATES,
        "models": {},
    }
    if args.only_st_floor:
        if args.st_floor is None:
            sys.exit("--only-st-floor needs --st-floor DIR")
        report["st_floor"] = {str(d): st_floor(d, args.st_floor, min(args.requests, 400), args.onnx_threads)
                              for d in models}
        print(json.dumps(report["st_floor"], indent=2))
        (HERE / "sidecar_st_floor.json").write_text(json.dumps(report, indent=2) + "\n")
        return
    for directory, checkpoint in zip(models, checkpoints, strict=True):
        config = json.loads((directory / "config.json").read_text())
        entry = {"model_type": config["model_type"], "vocab_size": config["vocab_size"],
                 "in_process": in_process(directory, checkpoint, args.repeat),
                 "http": over_http(directory, args.requests)}
        name = directory.relative_to(ROOT) if directory.is_relative_to(ROOT) else directory
        report["models"][str(name)] = entry
        print_model(directory, entry)
    if not args.no_sweep:
        report["thread_sweep"] = thread_sweep(models[0], 160, 2000)
        print_sweep(report["thread_sweep"])
    big_vocab = args.big_vocab
    if big_vocab is None and not args.no_big_vocab and (ROOT / "runs" / "demo" / "model").is_dir():
        big_vocab = widen_vocabulary(ROOT / "runs" / "demo" / "model", ROOT / "runs" / "bench" / "vocab-50k",
                                     50_000)
    if big_vocab is not None:
        report["big_vocabulary"] = big_vocabulary(big_vocab, 2000)
        big = report["big_vocabulary"]
        print(f"\nvocabulary {big['vocab_size']:,}: serving peak RSS {big['peak_rss_mb']} MB "
              f"(after loading {big['peak_rss_mb_after_load']} MB; target ≤ 400 MB)")
    (HERE / "sidecar.json").write_text(json.dumps(report, indent=2) + "\n")


def print_model(directory: Path, entry: dict[str, Any]) -> None:
    p, h = entry["in_process"], entry["http"]
    print(f"\n{entry['model_type']} ({directory}), {p['batch']} questions a request")
    print(f"  in process p50: onnxruntime floor {p['onnx_floor']['p50_ms']:.2f} ms, uncached "
          f"{p['uncached']['p50_ms']:.2f} ms ({p['uncached_over_floor_p50']:.2f}× the floor; target ≤ 1.25), "
          f"cached {p['cached']['p50_ms']:.3f} ms (target ≤ 1)")
    if "torch_eager" in p:
        print(f"  PyTorch eager {p['torch_eager']['p50_ms']:.2f} ms: ONNX {p['torch_over_onnx_p50']:.2f}× "
              "faster (target ≥ 1.5)")
    for key in ("concurrency_1", "concurrency_16", "concurrency_16_open_loop"):
        r = h[key]
        print(f"  HTTP {key.replace('_', ' ')}: p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, "
              f"{r['requests_per_second']:.0f} req/s, {r['errors']} errors / {r['requests']}")
    print(f"  server peak RSS {h['server_peak_rss_mb']} MB")


def print_sweep(rows: list[dict[str, Any]]) -> None:
    print("\nthreads × onnx threads at concurrency 16: uncached p50/p99 ms, req/s | cached p50/p99 ms, req/s")
    for r in rows:
        u, c = r["uncached"], r["cached"]
        print(f"  {r['threads']} × {r['onnx_threads']}: {u['p50_ms']:7.1f} / {u['p99_ms']:7.1f} "
              f"{u['requests_per_second']:6.1f} | {c['p50_ms']:6.2f} / {c['p99_ms']:6.2f} "
              f"{c['requests_per_second']:6.0f}")


if __name__ == "__main__":
    main()
