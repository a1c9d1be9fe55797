"""``es index`` against the encoder's own speed (issue 36, item 2), on the same texts in one run.

Does indexing wait on the encoder (the physical limit here) or on the product? On the Maven-assembled
OpenSearch 2.19.1 node (1 GB heap) and ``esrerank serve`` of MiniLM's fp32 export (as
``benchmarks/serving.py`` builds it; ``--model DIR`` for another), with the AskUbuntu questions with
bodies (``val.tsv``: 1,804; ``--lines N`` for the first N lines), in batches of ``--batch-size`` (200,
``es index``'s default), each embedding run on a fresh sidecar (an empty encoding cache), runs in turn:

- ``encode_alone``: ``/v1/encode`` of the same texts (each question's ``rerank_text``), batch after
  batch, nothing else: the encoder's questions/s through HTTP, what ``es index`` can reach at best;
- ``client_sequential``: ``es index``'s run (``elastic/indexing.py``'s ``index_run``, in this process)
  with ``ahead=0``: embed a batch, then send it, then the next (the product before issue 36);
- ``client_pipelined``: the same with the read-ahead (``ahead=1``, what ``es index`` does now: the next
  batch is embedded while the cluster stores the last; ``elastic/read_ahead.py``);
- ``text_only``: an index made ``--no-vectors`` (no embedding at all): the cluster's side alone.

``--rounds`` (3) rounds of the four, interleaved, so a change of the machine's load (a shared machine)
touches each alike; the JSON holds every run, the median questions/s of each,
``ratio_pipelined_to_encode`` (issue 36's bar: >= 0.9), the machine and its load averages.

Usage: ``python benchmarks/index_speed.py [--lines 1804] [--rounds 3] [--batch-size 200] [--model DIR]``;
writes ``benchmarks/index_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _machine import load_average, machine
from opensearch_modes import VAL, FreshSidecar
from serving import transformer_exports

#: The runs of each round, in order: (index, read-ahead, ``es setup`` flags); encode_alone has no index.
RUNS: dict[str, tuple[str, int, list[str]]] = {
    "encode_alone": ("", 0, []),
    "client_pipelined": ("speed-pipe", 1, []),
    "client_sequential": ("speed-seq", 0, []),
    "text_only": ("speed-text", 1, ["--no-vectors"]),
}
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def encode_alone(sidecar: FreshSidecar, questions: list[Any], batch_size: int) -> dict[str, Any]:
    """``/v1/encode`` of every question's ``rerank_text``, batch after batch, on a fresh sidecar."""
    from es_plugin_bridge.bridge.sidecar_client import SidecarClient

    sidecar.restart()
    embedder = SidecarClient(sidecar.url, timeout=600.0)
    load = load_average()
    t0 = time.perf_counter()
    for start in range(0, len(questions), batch_size):
        embedder.embed(questions[start:start + batch_size])
    seconds = time.perf_counter() - t0
    return {"questions": len(questions), "seconds": round(seconds, 2),
            "questions_per_second": round(len(questions) / seconds, 1), "load_average_before": load}


def setup(model: Path, index: str, flags: list[str], es_url: str, sidecar_url: str) -> None:
    """``es setup``, again while a fresh node's ml-commons is not ready (its master key, its indexes)."""
    exe = str(Path(sys.executable).with_name("esrerank"))
    argv = [exe, "es", "setup", str(model), "--index", index, "--recreate", *flags, "--es-url", es_url,
            "--sidecar", sidecar_url]
    for _ in range(5):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode == 0:
            return
        if "master key timed out" not in done.stderr and "shard state" not in done.stderr:
            break
        time.sleep(3)
    sys.exit(f"es setup {index} failed: {done.stderr}")


def index_once(model: Path, sidecar: FreshSidecar, es_url: str, index: str, questions: list[Any],
               batch_size: int, ahead: int, flags: list[str]) -> dict[str, Any]:
    """``es setup`` (CLI) then ``es index``'s run in this process, timed; a fresh sidecar before it."""
    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
    from es_plugin_bridge.elastic.cluster.connection import Connection
    from es_plugin_bridge.elastic.indexing import index_run

    sidecar.restart()
    setup(model, index, flags, es_url, sidecar.url)
    client = Connection(url=es_url).client()
    load = load_average()
    t0 = time.perf_counter()
    target = SidecarTarget(sidecar.url, timeout=600.0)
    run = index_run(client, index, questions, target, batch_size=batch_size, resume=False, max_retries=5,
                    progress=False, ahead=ahead)
    seconds = time.perf_counter() - t0
    if run.error:
        sys.exit(f"es index into {index} failed: {run.error}")
    return {"questions": run.report.indexed, "seconds": round(seconds, 2),
            "questions_per_second": round(run.report.indexed / seconds, 1), "ahead": ahead,
            "encode_requests": sidecar.embed_requests(), "load_average_before": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=None, help="The first N lines of val.tsv (default all).")
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="Each run this many times, interleaved.")
    parser.add_argument("--model", type=Path, default=None, help="Default: MiniLM's fp32 export.")
    parser.add_argument("--out", type=Path, default=HERE / "index_speed.json")
    args = parser.parse_args()

    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.local_http import free_port
    from es_plugin_bridge.opensearch_node import layout, node

    model = args.model or transformer_exports(ROOT / "build" / "serving-models")[0]
    home = layout.assemble(layout.default_home(ROOT))
    run_dir = ROOT / "build" / "opensearch" / "bench-index-speed"
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    data = VAL
    if args.lines:
        data = run_dir.with_name(f"bench-val-{args.lines}.tsv")  # build/ is git-ignored
        data.write_text("".join(VAL.read_text(encoding="utf-8").splitlines(keepends=True)[:args.lines]),
                        encoding="utf-8")
    questions = list(read_spec(f"pairs:{data}").questions.values())
    report = machine(node=f"OpenSearch {layout.SERVER_VERSION} assembled from Maven Central, 1 GB heap, "
                          "on this machine", model=str(model.name), questions=len(questions),
                     batch_size=args.batch_size, data=str(data.relative_to(ROOT)))
    started = node.start(home, run_dir)
    sidecar = FreshSidecar(model, free_port(), [])
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in RUNS}
    try:
        for _ in range(args.rounds):  # interleaved: a change of the machine's load touches every run alike
            runs["encode_alone"].append(encode_alone(sidecar, questions, args.batch_size))
            for name, (index, ahead, flags) in RUNS.items():
                if name != "encode_alone":
                    runs[name].append(index_once(model, sidecar, started.url, index, questions,
                                                 args.batch_size, ahead, flags))
            print(json.dumps({name: done[-1] for name, done in runs.items()}), flush=True)
    finally:
        sidecar.stop()
        node.stop(started)
    rate = {name: statistics.median(run["questions_per_second"] for run in done)
            for name, done in runs.items()}
    report["runs"] = runs
    report["median_questions_per_second"] = rate
    report["ratio_pipelined_to_encode"] = round(rate["client_pipelined"] / rate["encode_alone"], 3)
    report["ratio_sequential_to_encode"] = round(rate["client_sequential"] / rate["encode_alone"], 3)
    report["load_average_at_end"] = load_average()
    report["command"] = " ".join(["python", "benchmarks/index_speed.py", *sys.argv[1:]])
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    keys = ("median_questions_per_second", "ratio_pipelined_to_encode",
            "ratio_sequential_to_encode")
    print(json.dumps({k: report[k] for k in keys}, indent=2))


if __name__ == "__main__":
    main()
