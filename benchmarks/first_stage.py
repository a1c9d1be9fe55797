"""First-stage benchmark: the embedded engine against real Lucene 8, in the same run.

Indexes the distinct titles of the shipped ``train_titles.tsv`` (~36,000) with every similarity,
runs the first title of each pair as a query (top 10), and reports build time and query latency
(p50, p99, mean) of both engines, with their ratios. Lucene is timed two ways:

* ``lucene_python``: ``IndexSearcher.search(query, 10)`` called from Python through jpype, results
  read back (the query objects are built beforehand); this is what the targets compare against,
  as both engines are then called from the same Python process;
* ``lucene_jvm``: the same call timed inside the JVM by a tiny Java loop (compiled here when
  ``javac`` exists), i.e. Lucene's own latency without the bridge.

Both engines are warmed up (two passes) before timing. Usage::

    python benchmarks/first_stage.py [--queries 1000] [--out benchmarks/first_stage.json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _machine import load_average, machine  # benchmarks/ is on sys.path when run as a script

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.engines import SIMILARITIES, EmbeddedIndex
from es_plugin_bridge.engines import lucene as lucene_bridge

ROOT = Path(__file__).resolve().parents[1]
TITLES = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "train_titles.tsv"
K = 10
TARGET_P50_MS = 2.0
TARGET_RATIO = 3.0
TARGET_BUILD_S = 10.0
JAVA_TIMER = """
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.Query;

public final class FirstStageTimer {
  public static long[] time(IndexSearcher searcher, Query[] queries, int k, int rounds)
      throws java.io.IOException {
    long[] out = new long[queries.length];
    for (int r = 0; r < rounds; r++) {
      for (int i = 0; i < queries.length; i++) {
        long start = System.nanoTime();
        searcher.search(queries[i], k);
        out[i] = System.nanoTime() - start;
      }
    }
    return out;
  }
}
"""


def tokenizer() -> tuple[Any, str]:
    """The product's preprocessing when importable, else lowercase word characters."""
    try:
        from es_plugin_bridge.text import Preprocessor, TextOptions

        pre = Preprocessor(TextOptions())
        return (lambda text: pre.tokens(Question("q", text))), "Preprocessor(TextOptions()).tokens"
    except ImportError:
        return (lambda text: re.findall(r"\w+", text.lower())), "re.findall(r'\\w+', text.lower())"


def load(n_queries: int) -> tuple[list[str], list[str]]:
    titles: dict[str, None] = {}
    queries: list[str] = []
    for line in TITLES.read_text(encoding="utf-8").splitlines():
        _, first, second = line.split("\t")
        titles.setdefault(first)
        titles.setdefault(second)
        if len(queries) < n_queries:
            queries.append(first)
    return list(titles), queries


def summary(seconds: list[float] | np.ndarray) -> dict[str, float]:
    ms = np.asarray(seconds, dtype=np.float64) * 1000
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 4),
        "p99_ms": round(float(np.percentile(ms, 99)), 4),
        "mean_ms": round(float(ms.mean()), 4),
    }


def time_calls(fn: Any, items: list[Any], warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        for item in items:
            fn(item)
    out = []
    for item in items:
        start = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - start)
    return out


def jvm_timer(searcher: Any) -> Any | None:
    """Compile and load the Java timing loop; None where javac is missing."""
    import jpype

    if shutil.which("javac") is None:
        return None
    build = Path(tempfile.mkdtemp(prefix="first_stage_timer_"))
    (build / "FirstStageTimer.java").write_text(JAVA_TIMER)
    core = next(j for j in lucene_bridge.lucene_jars() if "lucene-core" in j)
    subprocess.run(["javac", "-cp", core, "-d", str(build), str(build / "FirstStageTimer.java")], check=True)
    url = jpype.JClass("java.io.File")(str(build)).toURI().toURL()
    loader = jpype.JClass("java.net.URLClassLoader")([url], searcher.getClass().getClassLoader())
    return jpype.JClass("FirstStageTimer", loader=loader)


def machine_info(tokens_desc: str) -> dict[str, Any]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return machine(
        numpy=np.__version__,
        java=java[0] if java else "",
        lucene_jars=[Path(j).name for j in lucene_bridge.lucene_jars()],
        tokenizer=tokens_desc,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "first_stage.json")
    args = parser.parse_args()

    tokens, tokens_desc = tokenizer()
    report: dict[str, Any] = {"command": "python " + " ".join(sys.argv), "machine": machine_info(tokens_desc)}
    titles, query_texts = load(args.queries)
    start = time.perf_counter()
    docs = [tokens(t) for t in titles]
    queries = [q for q in (tokens(t) for t in query_texts) if q]
    report["corpus"] = {
        "documents": len(docs),
        "queries": len(queries),
        "k": K,
        "tokenize_s": round(time.perf_counter() - start, 3),
    }

    reason = lucene_bridge.unavailable_reason()
    lucene = timer = None
    if reason is None:
        start = time.perf_counter()
        lucene = lucene_bridge.LuceneIndex(docs, "bm25")
        report["lucene_build_s_via_jpype"] = round(time.perf_counter() - start, 3)
        import jpype

        report["machine"]["lucene_version"] = str(jpype.JClass("org.apache.lucene.util.Version").LATEST)
        timer = jvm_timer(lucene.searcher)
    else:
        report["lucene_unavailable"] = reason

    results: dict[str, Any] = {}
    for name in SIMILARITIES:
        start = time.perf_counter()
        engine = EmbeddedIndex.build(docs, name)
        row: dict[str, Any] = {"engine": {"build_s": round(time.perf_counter() - start, 3)}}
        row["engine"].update(summary(time_calls(lambda q, e=engine: e.search(q, K), queries)))
        if lucene is not None:
            view = lucene.with_similarity(name)
            prepared = [view.query(q) for q in queries]
            row["lucene_python"] = summary(time_calls(lambda q, v=view: v.search_query(q, K), prepared))
            if timer is not None:
                array = jpype.JArray(jpype.JClass("org.apache.lucene.search.Query"))(prepared)
                nanos = np.asarray(timer.time(view.searcher, array, K, 5), dtype=np.float64)
                row["lucene_jvm"] = summary(nanos / 1e9)
            mismatches = sum(
                [int(d) for d, _ in engine.search(q, K)] != [d for d, _ in view.search_query(p, K)]
                for q, p in zip(queries, prepared, strict=True)
            )
            row["top10_order_mismatches_vs_lucene"] = mismatches
            for side in ("lucene_python", "lucene_jvm"):
                if side in row:
                    row[f"p50_ratio_vs_{side}"] = round(row["engine"]["p50_ms"] / row[side]["p50_ms"], 3)
        results[name] = row
        print_row(name, row)
    report["results"] = results
    report["targets"] = targets(results)
    report["machine"]["load_average_at_end"] = load_average()
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["targets"], indent=2))
    print(f"wrote {args.out}")


def targets(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets: build <= 10 s; BM25 and LM-Dirichlet p50 <= 2 ms and <= 3x Lucene's."""
    out: dict[str, Any] = {
        "build_s_max": max(r["engine"]["build_s"] for r in results.values()),
        "build_ok": all(r["engine"]["build_s"] <= TARGET_BUILD_S for r in results.values()),
    }
    for name in ("bm25", "lmdirichlet"):
        row = results[name]
        out[f"{name}_p50_ok"] = row["engine"]["p50_ms"] <= TARGET_P50_MS
        if "p50_ratio_vs_lucene_python" in row:
            out[f"{name}_within_3x_of_lucene_python"] = row["p50_ratio_vs_lucene_python"] <= TARGET_RATIO
        if "p50_ratio_vs_lucene_jvm" in row:
            out[f"{name}_within_3x_of_lucene_jvm"] = row["p50_ratio_vs_lucene_jvm"] <= TARGET_RATIO
    return out


def print_row(name: str, row: dict[str, Any]) -> None:
    engine = row["engine"]
    cells = [
        f"{name:16s}",
        f"build {engine['build_s']:6.2f}s",
        f"p50 {engine['p50_ms']:7.3f}ms",
        f"p99 {engine['p99_ms']:7.3f}ms",
    ]
    for side in ("lucene_python", "lucene_jvm"):
        if side in row:
            cells.append(
                f"{side} p50 {row[side]['p50_ms']:7.3f}ms p99 {row[side]['p99_ms']:7.3f}ms "
                f"(x{row[f'p50_ratio_vs_{side}']:.2f})"
            )
    if "top10_order_mismatches_vs_lucene" in row:
        cells.append(f"order mismatches {row['top10_order_mismatches_vs_lucene']}")
    print(" | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
