"""The OpenSearch modes' speed on a real node, in one run: indexing throughput with and without embedding
(by this client, or by OpenSearch at ingest), and search latency of a top 10 per mode against the same
first stage alone.

On the Maven-assembled OpenSearch 2.19.1 node (``es_plugin_bridge/opensearch_node``, 1 GB heap) and
``esrerank serve`` on MiniLM's fp32 export (as ``benchmarks/serving.py`` builds it), both on this
machine.

*Indexing*: ``es setup`` then a timed ``es index`` (the command's whole run, reading the data included)
of the AskUbuntu questions with bodies (``val.tsv``: 1,804), three times, each into its own index:
``--no-vectors`` (text only), client-side embedding (``es index`` calls ``/v1/encode``) and
``--embed-at-ingest`` (OpenSearch's ingest pipeline calls it through ml-commons). Each embedding run
starts a fresh sidecar on the same port, so both encode every text cold (the second would otherwise
find them all in the sidecar's encoding cache); the JSON counts the ``/v1/encode`` calls of each (at
ingest: one per processor per batch of 200, the second answered from the cache).

*Search*: a fresh sidecar again, then for each of ``--queries`` AskUbuntu titles, interleaved (every
query runs every system in turn, so the machine's load touches all alike), on the client-embedded index:
the first stage alone (BM25 top 10, one search), mode ``rerank`` (OpenSearch calls the sidecar on a
window of ``--window``), ``bridge`` (this client calls it on the same window), and the stored-vector
modes ``vectors``, ``hybrid`` and ``hybrid-rrf`` (this client embeds the query; OpenSearch scores the
stored vectors and terms). Each as ``es search`` runs it, through the library's modes. The JSON holds
p50/p95 per system, each mode's p50 over the first stage's, the machine and its load averages.

The sidecar keeps an encoding cache by default, and AskUbuntu windows share many questions: with it the
rerank figures are mostly warm; ``--cache-size 0`` encodes every text of every window (the uncached
cost; the ingest run then encodes every text twice, once per processor).

Usage: ``python benchmarks/opensearch_modes.py [--quick] [--queries 200] [--window 100] [--cache-size 0
--out benchmarks/opensearch_modes_uncached.json]``; writes ``benchmarks/opensearch_modes.json``.
``--quick``: 50 queries and the first 600 lines of ``val.tsv`` (a few minutes on two cores).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from _machine import load_average, machine
from serving import transformer_exports
from sidecar import askubuntu_titles, stats

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VAL = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
#: Indexing runs: (name, index, ``es setup`` flags, what it measures).
INDEXING = (
    ("text_only", "bench-text", ["--no-vectors"], "es setup --no-vectors: es index sends the text only"),
    ("client_embedding", "bench-client", [], "es index embeds each batch through /v1/encode"),
    ("ingest_embedding", "bench-ingest", ["--embed-at-ingest"],
     "es setup --embed-at-ingest: OpenSearch's ingest pipeline embeds (ml-commons, neural-search)"),
)
MODES = ("rerank", "bridge", "vectors", "hybrid", "hybrid-rrf")
SEARCH_INDEX = "bench-client"


def esrerank(*args: str) -> str:
    exe = str(Path(sys.executable).with_name("esrerank"))
    done = subprocess.run([exe, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"esrerank {' '.join(args)} failed: {done.stderr}")
    return done.stdout


class FreshSidecar:
    """``esrerank serve`` started anew (an empty encoding cache) on one port, so the connectors ``es
    setup`` registered keep reaching it."""

    def __init__(self, model: Path, port: int, options: list[str]) -> None:
        self.model, self.port, self.options = model, port, options
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restart(self) -> None:
        from es_plugin_bridge.local_http import NotReady, wait_until_ready

        self.stop()
        exe = Path(sys.executable).with_name("esrerank")
        self.proc = subprocess.Popen([str(exe), "serve", str(self.model), "--port", str(self.port),
                                      *self.options], stderr=subprocess.DEVNULL)
        proc = self.proc
        try:
            wait_until_ready(f"{self.url}/readyz", timeout=120, alive=lambda: proc.poll() is None)
        except NotReady as exc:
            sys.exit(f"esrerank serve {self.model} did not come up: {exc}")

    def embed_requests(self) -> int:
        """``/v1/encode`` requests answered 200 since this start (from ``/metrics``)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        found = re.search(r'esrerank_requests_total\{endpoint="/v1/encode",status="200"\} ([0-9.e+]+)', text)
        return int(float(found.group(1))) if found else 0

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


def indexing_runs(model: Path, sidecar: FreshSidecar, common: list[str], spec: str) -> dict[str, Any]:
    """Set up and index each of :data:`INDEXING`, each embedding run on a fresh sidecar."""
    out = {}
    for name, index, flags, what in INDEXING:
        if "--no-vectors" not in flags or sidecar.proc is None:
            sidecar.restart()
        esrerank("es", "setup", str(model), "--index", index, *flags, *common)
        before = sidecar.embed_requests()
        load = load_average()
        t0 = time.perf_counter()
        printed = esrerank("es", "index", spec, "--index", index, "--no-progress", *common)
        seconds = time.perf_counter() - t0
        indexed = int(re.search(r"indexed (\d+)", printed).group(1))
        out[name] = {"questions": indexed, "seconds": round(seconds, 2),
                     "docs_per_second": round(indexed / seconds, 1),
                     "embed_requests": sidecar.embed_requests() - before, "what": what,
                     "load_average_before": load}
        print(json.dumps({name: out[name]}), flush=True)
    return out


def search_runs(url: str, sidecar_url: str, window: int, queries: int, warmup: int) -> dict[str, Any]:
    """Interleaved latency of the first stage and every mode on :data:`SEARCH_INDEX`."""
    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
    from es_plugin_bridge.data.questions import question_from_text
    from es_plugin_bridge.elastic.cluster.connection import Connection, cluster_info
    from es_plugin_bridge.elastic.engine import open_engine
    from es_plugin_bridge.elastic.modes.factory import make_mode
    from es_plugin_bridge.elastic.setup import read_meta
    from es_plugin_bridge.engines.registry import EngineContext
    from es_plugin_bridge.text import Preprocessor

    client = Connection(url=url).client()
    cluster = cluster_info(client)
    meta = read_meta(client, SEARCH_INDEX)
    engine = open_engine(EngineContext(tokens=Preprocessor(meta.text_options()).tokens,
                                       options={"client": client, "index": SEARCH_INDEX}))
    stage = engine.first_stage("bm25")
    sidecar = SidecarTarget(sidecar_url, None, 10.0)
    modes = {name: make_mode(name, stage, meta, window=window, sidecar=sidecar, cluster=cluster)
             for name in MODES}
    systems = {"first_stage": lambda q: stage.search(q, 10),
               **{f"mode_{name}": (lambda q, m=mode: m.search(q, 10)) for name, mode in modes.items()}}
    texts = askubuntu_titles(queries + warmup, seed=7)
    times: dict[str, list[float]] = {name: [] for name in systems}
    not_reranked = {name: 0 for name in modes}
    load = load_average()
    for i, query in enumerate(question_from_text(t) for t in texts):
        for name, search in systems.items():
            t0 = time.perf_counter()
            result = search(query)
            ms = 1000 * (time.perf_counter() - t0)
            if i >= warmup:
                times[name].append(ms)
                mode = name.removeprefix("mode_")
                if mode in not_reranked and not result.reranked:
                    not_reranked[mode] += 1
    search = {name: stats(values) for name, values in times.items()}
    base = search["first_stage"]["p50_ms"]
    return {"search": search,
            "p50_over_first_stage": {name: round(v["p50_ms"] / base, 2)
                                     for name, v in search.items() if name != "first_stage"},
            "not_reranked": not_reranked, "search_index": SEARCH_INDEX, "window": window, "top": 10,
            "load_average_before_searches": load}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=None, help="Default 200 (--quick: 50).")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=None, help="Default 10 (--quick: 5).")
    parser.add_argument("--quick", action="store_true",
                        help="50 queries, 5 warm-up, the first 600 lines of val.tsv for the indexing runs.")
    parser.add_argument("--cache-size", type=int, default=None,
                        help="The sidecar's --cache-size (default: serve's own; 0: every text encoded).")
    parser.add_argument("--out", type=Path, default=HERE / "opensearch_modes.json")
    args = parser.parse_args()
    queries = args.queries if args.queries is not None else (50 if args.quick else 200)
    warmup = args.warmup if args.warmup is not None else (5 if args.quick else 10)

    from es_plugin_bridge.local_http import free_port
    from es_plugin_bridge.opensearch_node import layout, node

    model, _ = transformer_exports(ROOT / "build" / "serving-models")
    home = layout.assemble(layout.default_home(ROOT))
    run_dir = ROOT / "build" / "opensearch" / "bench"
    subprocess.run(["rm", "-rf", str(run_dir)], check=True)
    spec = f"pairs:{VAL}"
    if args.quick:
        head = run_dir.with_name("bench-val-600.tsv")  # build/ is git-ignored
        head.write_text("".join(VAL.read_text(encoding="utf-8").splitlines(keepends=True)[:600]),
                        encoding="utf-8")
        spec = f"pairs:{head}"
    report = machine(node=f"OpenSearch {layout.SERVER_VERSION} assembled from Maven Central, 1 GB heap, "
                          "on this machine", model="MiniLM fp32 export (benchmarks/serving.py)")
    started = node.start(home, run_dir)
    cache = [] if args.cache_size is None else ["--cache-size", str(args.cache_size)]
    report["sidecar"] = " ".join(["esrerank serve MODEL", *cache])
    sidecar = FreshSidecar(model, free_port(), cache)
    common = ["--es-url", started.url, "--sidecar", sidecar.url]
    try:
        report["indexing"] = indexing_runs(model, sidecar, common, spec)
        sidecar.restart()
        report.update(search_runs(started.url, sidecar.url, args.window, queries, warmup))
        report["load_average_at_end"] = load_average()
        report["command"] = " ".join(["python", "benchmarks/opensearch_modes.py", *sys.argv[1:]])
    finally:
        sidecar.stop()
        node.stop(started)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("indexing", "search", "p50_over_first_stage", "not_reranked")},
                     indent=2))


if __name__ == "__main__":
    main()
