"""Head to head on one OpenSearch node: the engine's own hybrid configurations against every product mode,
the same model, the same stored vectors, the same held-out duplicate queries, in one run.

The data is ``make demo``'s split of the shipped AskUbuntu titles (``runs/demo/askubuntu``): every title
of ``all.tsv`` indexed (36,346), the test split's duplicate pairs as queries (998; the query's own title
excluded from its hits), the dev split for everything fitted. The model is the demo's MiniLM int8 export
with its learned hybrid fitted by ``esrerank fit-hybrid`` on the dev split among the same titles (as
``make demo`` does). The index is set up with ``--embed-at-ingest``: OpenSearch embeds every title, and
every query of the ``neural`` clauses below, through the ml-commons model ``es setup`` registers on the
sidecar's ``/v1/embed`` (the Cohere embed blueprint, as OpenSearch's hybrid-search tutorial sets it up).
MiniLM fine-tuned on the train split is not in this run (see docs/results.md).

The engine's own configurations (their bodies in the JSON), all with the same lexical clause as the
product's first stage (BM25 ``match`` on the preprocessed title) and the vectors through OpenSearch's
own ``neural`` query with that model, and each hit's ``_source`` but the vector, as the tutorial asks:

* ``os_bm25``: the ``match`` alone; ``os_neural``: ``neural`` alone, ``k`` 10;
* ``os_hybrid_tutorial``: the tutorial's ``hybrid`` query exactly as written (``neural`` ``k`` 5, no
  ``pagination_depth``, ``normalization-processor`` min_max / arithmetic_mean, weights 0.3 / 0.7);
* ``os_hybrid_k100``: the same with ``k`` 100; ``os_rrf``: ``k`` 100 and the ``score-ranker-processor``
  (RRF, rank constant 60);
* ``os_workbench_best``: the Search Relevance Workbench's grid (each normalisation × combination × weights
  0.0–1.0 in tenths; z_score is not in 2.19.1) searched on the dev queries, its best run on test.

The product's modes, through the library exactly as ``es search`` runs them (``--knn`` as it defaults:
HNSW): ``learned-hybrid`` (the default: one ``hybrid`` query whose vectors' clause is that ``neural``
query), the same with this client embedding the query (``/v1/encode``, then the search), ``learned-hybrid``
exact, ``hybrid``, ``hybrid-rrf``, ``vectors``, ``rerank``, ``bridge``.

Quality: MRR@10, Acc@1 and found@10 on every test query, each system's paired randomization test on
RR@10 against the best engine-own configuration (``evaluation.significance.paired_test``). Speed: p50 / p95
of the same searches at one client (systems interleaved query by query, so load touches all alike), and
at ``--clients`` clients over the first ``--latency-queries`` queries; requests per search (client →
engine, client → sidecar, engine → sidecar).

Usage: ``python benchmarks/engine_hybrid.py [--model runs/demo/transformer-onnx] [--split runs/demo/askubuntu]
[--queries N] [--latency-queries 200] [--clients 8]``; writes ``benchmarks/engine_hybrid.json`` and
``docs/img/engine_hybrid.png``. Needs ``make demo`` run first (its split and model).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _machine import load_average, machine
from opensearch_modes import FreshSidecar, esrerank

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
INDEX = "bench-hybrid"
TUTORIAL = {"normalization": {"technique": "min_max"},
            "combination": {"technique": "arithmetic_mean", "parameters": {"weights": [0.3, 0.7]}}}
MODES = {"learned-hybrid": None, "learned-hybrid (client /v1/encode)": None,
         "learned-hybrid (exact)": "exact", "hybrid": None, "hybrid-rrf": None, "vectors": None,
         "rerank": None, "bridge": None}
#: Requests per search: (client → engine, client → sidecar, engine → sidecar)
REQUESTS = {"os_bm25": (1, 0, 0), "os_neural": (1, 0, 1), "os_hybrid_tutorial": (1, 0, 1),
            "os_hybrid_k100": (1, 0, 1), "os_rrf": (1, 0, 1), "os_workbench_best": (1, 0, 1),
            "learned-hybrid": (1, 0, 1), "learned-hybrid (client /v1/encode)": (1, 1, 0),
            "learned-hybrid (exact)": (1, 1, 0), "hybrid": (2, 1, 0),
            "hybrid-rrf": (1, 1, 0), "vectors": (2, 1, 0), "rerank": (1, 0, 1), "bridge": (1, 1, 0)}
ENGINE_OWN = ("os_bm25", "os_neural", "os_hybrid_tutorial", "os_hybrid_k100", "os_rrf", "os_workbench_best")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def engine_bodies(model_id: str, workbench: dict[str, Any]) -> dict[str, Callable[[list, Any, str], dict]]:
    """Each engine-own configuration as a search body of (first-stage clause, excluded id, text)."""
    def neural(text: str, k: int, qid: str) -> dict:
        return {"neural": {"vector": {"query_text": text, "model_id": model_id, "k": k,
                                      "filter": {"bool": {"must_not": [{"ids": {"values": [qid]}}]}}}}}

    def hybrid(first: dict, text: str, qid: str, k: int, processor: dict) -> dict:
        return {"query": {"hybrid": {"queries": [first, neural(text, k, qid)]}},
                "search_pipeline": {"phase_results_processors": [processor]}}

    return {
        "os_bm25": lambda first, qid, text: {"query": first},
        "os_neural": lambda first, qid, text: {"query": neural(text, 10, qid)},
        "os_hybrid_tutorial": lambda first, qid, text: hybrid(first, text, qid, 5,
                                                               {"normalization-processor": TUTORIAL}),
        "os_hybrid_k100": lambda first, qid, text: hybrid(first, text, qid, 100,
                                                           {"normalization-processor": TUTORIAL}),
        "os_rrf": lambda first, qid, text: hybrid(first, text, qid, 100, {"score-ranker-processor": {
            "combination": {"technique": "rrf", "rank_constant": 60}}}),
        "os_workbench_best": lambda first, qid, text: hybrid(first, text, qid, 100,
                                                              {"normalization-processor": workbench}),
    }


def workbench_best(model: Path, dev: Path, corpus: Path) -> tuple[dict[str, Any], str]:
    """The Workbench-style grid's best on dev (the default depth: size 10 per sub-query), in process by the
    engine's own rule (``core.hybrid_fusion``), as its processor and in words."""
    import numpy as np

    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.serving.scorer import ExportedScorer
    from es_plugin_bridge.text import Preprocessor, TextOptions
    from es_plugin_bridge.training.hybrid_dev import hybrid_dev_queries
    from es_plugin_bridge.training.hybrid_fit import per_query_table

    scorer = ExportedScorer.from_dir(model)
    corpus_questions = list(read_spec(f"pairs:{corpus}").questions.values())
    queries = hybrid_dev_queries([read_spec(f"pairs:{dev}")], Preprocessor(TextOptions()), scorer,
                                 corpus=corpus_questions)
    table, configs = per_query_table(queries)
    keep = [i for i, c in enumerate(configs) if c.window == 10]
    best = configs[keep[int(np.argmax(table[:, keep].mean(axis=0)))]]
    return ({"normalization": {"technique": best.normalization},
             "combination": {"technique": best.combination, "parameters": {"weights": best.weight_list()}}},
            best.describe())


def main() -> None:  # noqa: PLR0915 - one run, its steps in order
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=ROOT / "runs" / "demo" / "transformer-onnx")
    parser.add_argument("--split", type=Path, default=ROOT / "runs" / "demo" / "askubuntu")
    parser.add_argument("--queries", type=int, default=None, help="Default: every test duplicate query.")
    parser.add_argument("--latency-queries", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--out", type=Path, default=HERE / "engine_hybrid.json")
    parser.add_argument("--plot-only", action="store_true", help="Redraw the plot from --out's JSON.")
    parser.add_argument("--quick", action="store_true",
                        help="A smoke run, not the benchmark: 40 queries among the test split and 2,000 "
                             "other titles, 20 latency queries; writes build/engine_hybrid_quick.json")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(args.out.read_text()), ROOT / "docs" / "img" / "engine_hybrid.png")
        return
    if not (args.model / "manifest.json").is_file() or not (args.split / "test.tsv").is_file():
        sys.exit(f"no demo model or split in {args.model} / {args.split}: run `make demo` first")
    config = json.loads((args.model / "config.json").read_text())
    if not config.get("hybrid"):
        sys.exit(f"{args.model} records no learned hybrid: run `esrerank fit-hybrid` (make demo does)")

    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.elastic import queries as dsl
    from es_plugin_bridge.elastic.cluster.connection import Connection, cluster_info
    from es_plugin_bridge.elastic.engine import open_engine
    from es_plugin_bridge.elastic.modes.factory import make_mode
    from es_plugin_bridge.elastic.setup import read_meta
    from es_plugin_bridge.engines.registry import EngineContext
    from es_plugin_bridge.evaluation.retrieval import duplicate_queries
    from es_plugin_bridge.evaluation.significance import paired_test
    from es_plugin_bridge.local_http import free_port
    from es_plugin_bridge.opensearch_node import layout, node
    from es_plugin_bridge.text import Preprocessor

    corpus = args.split / "all.tsv"
    if args.quick:
        corpus = ROOT / "build" / "engine_hybrid_quick.tsv"  # build/ is git-ignored
        lines = (args.split / "all.tsv").read_text(encoding="utf-8").splitlines(keepends=True)[:2000]
        corpus.write_text((args.split / "test.tsv").read_text(encoding="utf-8") + "".join(lines),
                          encoding="utf-8")
        args.queries, args.latency_queries = args.queries or 40, 20
        args.out = ROOT / "build" / "engine_hybrid_quick.json"
    test, _ = duplicate_queries(read_spec(f"pairs:{args.split / 'test.tsv'}").pairs)
    test = test[: args.queries] if args.queries else test
    print(f"workbench grid on dev ({args.split / 'dev.tsv'}) ...", flush=True)
    workbench, workbench_text = workbench_best(args.model, args.split / "dev.tsv", args.split / "all.tsv")
    home = layout.assemble(layout.default_home(ROOT))
    run_dir = ROOT / "build" / "opensearch" / "bench-hybrid"
    report: dict[str, Any] = machine(node=f"OpenSearch {layout.SERVER_VERSION} assembled from Maven Central, "
                                     "1 GB heap, on this machine",
                                     model=f"{args.model} (MiniLM int8, as make demo exports it)")
    started = node.start(home, run_dir)
    sidecar = FreshSidecar(args.model, free_port(), [])
    common = ["--es-url", started.url, "--sidecar", sidecar.url]
    try:
        sidecar.restart()
        # --embed-at-ingest: OpenSearch embeds every title through the ml-commons model es setup registers
        # on the sidecar's /v1/embed (the tutorial's set-up), and the same model embeds the queries of
        # both OpenSearch's neural query and mode learned-hybrid
        esrerank("es", "setup", str(args.model), "--index", INDEX, "--embed-at-ingest", "--recreate", *common)
        t0 = time.perf_counter()
        esrerank("es", "index", f"pairs:{corpus}", "--index", INDEX, "--no-progress", *common)
        report["index_seconds"] = round(time.perf_counter() - t0, 1)
        client = Connection(url=started.url, timeout=60).client()
        meta = read_meta(client, INDEX)
        model_id = meta.embedding["vector_model"]
        engine = open_engine(EngineContext(tokens=Preprocessor(meta.text_options()).tokens,
                                           options={"client": client, "index": INDEX}))
        stage = engine.first_stage("bm25")
        cluster = cluster_info(client)
        target = SidecarTarget(sidecar.url, None, 30.0)
        modes = {name: make_mode(name.split(" ")[0], stage, meta, window=100, sidecar=target, cluster=cluster,
                                 knn=knn) for name, knn in MODES.items()}
        modes["learned-hybrid (client /v1/encode)"].vector_model = None  # the client embeds, then searches
        bodies = engine_bodies(model_id, workbench)

        def engine_search(name: str, q: Any) -> list[str]:
            first = dsl.first_stage_query("bm25", stage.tokens(q.query), exclude={q.query.id})
            # the tutorial's _source: everything but the vector (its "excludes": ["passage_embedding"])
            answer = client.search(index=INDEX, size=10, source={"excludes": ["vector"]},
                                   **bodies[name](first, q.query.id, q.query.title))
            return [h["_id"] for h in answer["hits"]["hits"]]

        steps: dict[str, list[dict[str, float]]] = {name: [] for name in modes}

        def mode_search(name: str, q: Any) -> list[str]:
            result = modes[name].search(q.query, 10, exclude={q.query.id})
            steps[name].append(result.timings_ms)
            return [d for d, _ in result.hits]

        systems: dict[str, Callable[[Any], list[str]]] = {
            **{name: (lambda q, n=name: engine_search(n, q)) for name in ENGINE_OWN},
            **{name: (lambda q, n=name: mode_search(n, q)) for name in modes}}
        ranks: dict[str, list[int | None]] = {name: [] for name in systems}
        times: dict[str, list[float]] = {name: [] for name in systems}
        load = load_average()
        for i, q in enumerate(test):
            for name, search in systems.items():
                t = time.perf_counter()
                hits = search(q)
                times[name].append(1000 * (time.perf_counter() - t))
                ranks[name].append(hits.index(q.relevant.id) + 1 if q.relevant.id in hits else None)
            if i % 100 == 0:
                print(f"{i}/{len(test)} queries", flush=True)
        concurrent: dict[str, dict[str, float]] = {}
        for name, search in systems.items():
            sample = test[: args.latency_queries]

            def timed(q: Any, s: Callable[[Any], list[str]] = search) -> float:
                t = time.perf_counter()
                s(q)
                return 1000 * (time.perf_counter() - t)

            with ThreadPoolExecutor(args.clients) as pool:
                values = list(pool.map(timed, sample))
            concurrent[name] = {"p50_ms": _pct(values, 0.5), "p95_ms": _pct(values, 0.95)}
    finally:
        sidecar.stop()
        node.stop(started)

    rr = {name: [1.0 / r if r else 0.0 for r in values] for name, values in ranks.items()}
    quality = {name: {"mrr@10": round(100 * statistics.fmean(rr[name]), 2),
                      "acc@1": round(100 * sum(r == 1 for r in ranks[name]) / len(test), 2),
                      "found@10": sum(r is not None for r in ranks[name])} for name in systems}
    best_engine = max(ENGINE_OWN, key=lambda n: quality[n]["mrr@10"])
    systems_out = {}
    for name in systems:
        systems_out[name] = {
            **quality[name],
            "p_vs_best_engine_own": None if name == best_engine else
            paired_test(rr[name], rr[best_engine])["p_value"],
            "p_vs_tutorial": None if name == "os_hybrid_tutorial" else
            paired_test(rr[name], rr["os_hybrid_tutorial"])["p_value"],
            "p50_ms": _pct(times[name], 0.5), "p95_ms": _pct(times[name], 0.95),
            f"p50_ms_{args.clients}_clients": concurrent[name]["p50_ms"],
            f"p95_ms_{args.clients}_clients": concurrent[name]["p95_ms"],
            "requests": dict(zip(("client_to_engine", "client_to_sidecar", "engine_to_sidecar"),
                                 REQUESTS[name], strict=True)),
            "engine_own": name in ENGINE_OWN,
            **({"step_ms_p50": {step: _pct([t[step] for t in steps[name][: len(test)] if step in t], 0.5)
                                for step in sorted({k for t in steps[name] for k in t})}}
               if name in steps else {})}
    report.update({
        "queries": len(test), "documents": len(read_spec(f"pairs:{corpus}").questions),
        "learned_hybrid": config["hybrid"], "workbench_best": workbench_text,
        "best_engine_own": best_engine, "systems": systems_out, "load_average_before": load,
        "load_average_at_end": load_average(),
        "command": " ".join(["python", "benchmarks/engine_hybrid.py", *sys.argv[1:]]),
        "bodies": {name: bodies[name]({"match": {"title_bm25": {"query": "..."}}}, "QUERY_ID", "TEXT")
                   for name in ENGINE_OWN}})
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.out.with_suffix(".png") if args.quick else ROOT / "docs" / "img" / "engine_hybrid.png")
    for name, row in systems_out.items():
        print(f"{name:24} MRR@10 {row['mrr@10']:6.2f}  Acc@1 {row['acc@1']:6.2f}  "
              f"found {row['found@10']:4d}  p vs best own {row['p_vs_best_engine_own']}  "
              f"p50 {row['p50_ms']} ms")


def plot(report: dict[str, Any], path: Path) -> None:
    """Two panels, one bar per system, best MRR@10 first: MRR@10 and p50 latency (engine-own grey)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(report["systems"].items(), key=lambda item: item[1]["mrr@10"])
    names = [name for name, _ in rows]
    colours = ["grey" if row["engine_own"] else "tab:blue" for _, row in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 6), sharey=True)
    left.barh(names, [row["mrr@10"] for _, row in rows], color=colours)
    left.set_xlabel("MRR@10 (%)")
    left.set_xlim(min(row["mrr@10"] for _, row in rows) - 1, None)
    right.barh(names, [row["p50_ms"] for _, row in rows], color=colours)
    right.set_xlabel("p50 ms per search, 1 client")
    for axis, key in ((left, "mrr@10"), (right, "p50_ms")):
        for i, (_, row) in enumerate(rows):
            axis.annotate(f"{row[key]:g}", (row[key], i), xytext=(3, -3), textcoords="offset points",
                          fontsize=8)
    fig.suptitle(f"{report['queries']} AskUbuntu test duplicates among {report['documents']} titles "
                 "(grey: OpenSearch's own configurations)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
