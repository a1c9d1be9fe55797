"""The OpenSearch modes' speed on a real node, in one run: search latency of a top 10 per mode against the
same first stage alone, and indexing throughput.

On the Maven-assembled OpenSearch 2.19.1 node (``es_plugin_bridge/opensearch_node``, 1 GB heap) and
``esrerank serve`` on MiniLM's fp32 export (as ``benchmarks/serving.py`` builds it), both on this
machine: ``es setup`` and ``es index`` of the 2,000 AskUbuntu questions with bodies (``val.tsv``),
timed; then, for each of ``--queries`` AskUbuntu titles, interleaved (every query runs every system in
turn, so the machine's load touches all alike): the first stage alone (BM25 top 10, one search), mode
``rerank`` (OpenSearch calls the sidecar on a window of ``--window``) and mode ``bridge`` (this client
calls the sidecar on the same window). Each as ``es search`` runs it, through the library's modes. The
JSON holds p50/p95 per system, each mode's p50 over the first stage's, the indexing figures, the machine
and its load averages before and after.

Indexing is text only: OpenSearch has no embedding at ingest in the product yet (the issue "OpenSearch
first-class" lists it), so there is no with-pipeline figure to compare.

The sidecar keeps an encoding cache by default, and AskUbuntu windows share many questions: with it
the figures are mostly warm; ``--cache-size 0`` encodes every text of every window (the uncached cost).

Usage: ``python benchmarks/opensearch_modes.py [--queries 200] [--window 100] [--cache-size 0 --out
benchmarks/opensearch_modes_uncached.json]``; writes ``benchmarks/opensearch_modes.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from _machine import load_average, machine
from serving import transformer_exports
from sidecar import Sidecar, askubuntu_titles, stats

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VAL = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
INDEX = "bench-askubuntu"


def esrerank(*args: str) -> str:
    exe = str(Path(sys.executable).with_name("esrerank"))
    done = subprocess.run([exe, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"esrerank {' '.join(args)} failed: {done.stderr}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--cache-size", type=int, default=None,
                        help="The sidecar's --cache-size (default: serve's own; 0: every text encoded).")
    parser.add_argument("--out", type=Path, default=HERE / "opensearch_modes.json")
    args = parser.parse_args()

    from es_plugin_bridge.data.questions import question_from_text
    from es_plugin_bridge.elastic.connection import Connection, cluster_info
    from es_plugin_bridge.elastic.engine import open_engine
    from es_plugin_bridge.elastic.mode_factory import make_mode
    from es_plugin_bridge.elastic.setup import read_meta
    from es_plugin_bridge.engines.registry import EngineContext
    from es_plugin_bridge.opensearch_node import layout, node
    from es_plugin_bridge.text import Preprocessor

    model, _ = transformer_exports(ROOT / "build" / "serving-models")
    home = layout.assemble(layout.default_home(ROOT))
    run_dir = ROOT / "build" / "opensearch" / "bench"
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    report = machine(node=f"OpenSearch {layout.SERVER_VERSION} assembled from Maven Central, 1 GB heap, "
                          "on this machine", model="MiniLM fp32 export (benchmarks/serving.py)")
    started = node.start(home, run_dir)
    cache = [] if args.cache_size is None else ["--cache-size", str(args.cache_size)]
    report["sidecar"] = " ".join(["esrerank serve MODEL", *cache]) if cache else "esrerank serve MODEL"
    sidecar = Sidecar(model, *cache)
    sidecar_url = f"http://127.0.0.1:{sidecar.port}"
    common = ["--es-url", started.url, "--sidecar", sidecar_url]
    try:
        esrerank("es", "setup", str(model), "--index", INDEX, *common)
        t0 = time.perf_counter()
        out = esrerank("es", "index", f"pairs:{VAL}", "--index", INDEX, "--no-progress", *common)
        seconds = time.perf_counter() - t0
        indexed = int(re.search(r"indexed (\d+)", out).group(1))
        report["indexing"] = {"questions": indexed, "seconds": round(seconds, 2),
                              "docs_per_second": round(indexed / seconds, 1),
                              "what": "es index of text only (no embedding at ingest on OpenSearch yet); "
                                      "the command's whole run, reading the data included"}
        print(json.dumps(report["indexing"]), flush=True)

        client = Connection(url=started.url).client()
        cluster = cluster_info(client)
        meta = read_meta(client, INDEX)
        engine = open_engine(EngineContext(tokens=Preprocessor(meta.text_options()).tokens,
                                           options={"client": client, "index": INDEX}))
        stage = engine.first_stage("bm25")
        modes = {name: make_mode(name, stage, meta, window=args.window, sidecar_url=sidecar_url, token=None,
                                 timeout=10.0, cluster=cluster) for name in ("rerank", "bridge")}
        systems = {"first_stage": lambda q: stage.search(q, 10),
                   **{f"mode_{name}": (lambda q, m=mode: m.search(q, 10)) for name, mode in modes.items()}}
        queries = [question_from_text(t) for t in askubuntu_titles(args.queries + args.warmup, seed=7)]
        times: dict[str, list[float]] = {name: [] for name in systems}
        not_reranked = {name: 0 for name in modes}
        report["load_average_before_searches"] = load_average()
        for i, query in enumerate(queries):
            for name, search in systems.items():
                t0 = time.perf_counter()
                result = search(query)
                ms = 1000 * (time.perf_counter() - t0)
                if i >= args.warmup:
                    times[name].append(ms)
                    mode = name.removeprefix("mode_")
                    if mode in not_reranked and not result.reranked:
                        not_reranked[mode] += 1
        report["search"] = {name: stats(values) for name, values in times.items()}
        base = report["search"]["first_stage"]["p50_ms"]
        report["p50_over_first_stage"] = {name: round(v["p50_ms"] / base, 2)
                                          for name, v in report["search"].items() if name != "first_stage"}
        report["not_reranked"] = not_reranked
        report["window"], report["top"] = args.window, 10
        report["load_average_at_end"] = load_average()
        report["command"] = " ".join(["python", "benchmarks/opensearch_modes.py", *sys.argv[1:]])
    finally:
        sidecar.close()
        node.stop(started)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("search", "p50_over_first_stage", "not_reranked")}, indent=2))


if __name__ == "__main__":
    main()
