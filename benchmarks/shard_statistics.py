"""The price of global statistics: a first-stage search of 3 shards with ``dfs_query_then_fetch`` (what
every ``es`` command sends by default) against the engine's default ``query_then_fetch`` (``es search
--shard-statistics``), and against one shard (where the engine drops the DFS phase itself:
``TransportSearchAction`` turns a one-shard search into ``QUERY_THEN_FETCH``).

On three Maven-assembled OpenSearch 2.19.1 nodes on this machine (``opensearch_node/cluster.py``, 512 MB
a node; ``--es-url`` to use a running cluster instead): the AskUbuntu questions with bodies (``val.tsv``,
1,804) in an index of 3 shards × 1 replica and in one of 1 shard × 1 replica (the product's mappings and
documents), then ``--queries`` titles of the training pairs, interleaved (each query runs every system
in turn), through the product's own first stage (``ElasticsearchFirstStage``, BM25 top 10). The JSON
holds p50/p95 per system, the DFS phase's extra p50, and how many queries' top 10 (ids, or scores
beyond float noise) differ from the single shard's under per-shard statistics: what the speed costs.

Usage: ``python benchmarks/shard_statistics.py [--queries 300] [--es-url URL]``; writes
``benchmarks/shard_statistics.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _machine import load_average, machine  # noqa: E402

from es_plugin_bridge.data.spec import read_spec  # noqa: E402
from es_plugin_bridge.data.types import Question  # noqa: E402
from es_plugin_bridge.elastic import mappings  # noqa: E402
from es_plugin_bridge.elastic.cluster.opensearch_client import connect  # noqa: E402
from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage  # noqa: E402
from es_plugin_bridge.text import Preprocessor  # noqa: E402

SAMPLES = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs"
SYSTEMS = ("3 shards, global statistics (dfs)", "3 shards, per-shard statistics", "1 shard (dfs asked)")


def make_index(client, name: str, shards: int, questions: list[Question], tokens) -> None:
    client.raw.indices.delete(index=name, ignore_unavailable=True)
    client.indices.create(index=name, **mappings.index_body(shards=shards, replicas=1))
    lines: list[dict] = []
    for q in questions:
        lines += [{"index": {"_id": q.id}}, mappings.document(q, tokens(q))]
    answer = client.raw.bulk(index=name, body=lines, refresh=True)
    assert not answer["errors"]
    client.raw.cluster.health(index=name, wait_for_status="green", request_timeout=120)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(url: str, queries: int) -> dict:
    tokens = Preprocessor().tokens
    client = connect(url)
    questions = list(read_spec(f"pairs:{SAMPLES / 'val.tsv'}").questions.values())
    make_index(client, "stats-3-shards", 3, questions, tokens)
    make_index(client, "stats-1-shard", 1, questions, tokens)
    stages = {SYSTEMS[0]: ElasticsearchFirstStage(client, "stats-3-shards", "bm25", tokens),
              SYSTEMS[1]: ElasticsearchFirstStage(client, "stats-3-shards", "bm25", tokens,
                                                  global_statistics=False),
              SYSTEMS[2]: ElasticsearchFirstStage(client, "stats-1-shard", "bm25", tokens)}
    texts = [q.title for q in read_spec(f"pairs:{SAMPLES / 'train_titles.tsv'}").questions.values()][:queries]
    times: dict[str, list[float]] = {name: [] for name in SYSTEMS}
    differ = 0
    for stage in stages.values():  # warm each once
        stage.search(Question("warm", texts[0], ""), 10)
    for text in texts:
        query = Question("q", text, "")
        found = {}
        for name, stage in stages.items():
            start = time.perf_counter()
            found[name] = stage.search(query, 10)
            times[name].append(1000 * (time.perf_counter() - start))
        single, per_shard = found[SYSTEMS[2]], found[SYSTEMS[1]]
        differ += [d for d, _ in single] != [d for d, _ in per_shard] or any(
            abs(a - b) > 1e-4 * max(abs(a), 1.0) for (_, a), (_, b) in zip(single, per_shard, strict=False))
    report = {name: {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(percentile(ms, 0.95), 2)}
              for name, ms in times.items()}
    return {"searches_per_system": len(texts), "latency": report,
            "dfs_extra_p50_ms": round(report[SYSTEMS[0]]["p50_ms"] - report[SYSTEMS[1]]["p50_ms"], 2),
            "queries_whose_top10_differs_under_per_shard_statistics": differ}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--es-url", default=None, help="A running cluster (default: start three nodes).")
    parser.add_argument("--out", type=Path, default=HERE / "shard_statistics.json")
    args = parser.parse_args()
    report = machine(cluster="3 OpenSearch 2.19.1 nodes assembled from Maven Central, 512 MB heap each, "
                             "on this machine")
    report["command"] = " ".join(["python", "benchmarks/shard_statistics.py", *sys.argv[1:]])
    if args.es_url:
        report.update(measure(args.es_url, args.queries))
    else:
        from es_plugin_bridge.opensearch_node import cluster as cluster_nodes
        from es_plugin_bridge.opensearch_node import layout, node

        home = layout.assemble(layout.default_home(ROOT))
        with tempfile.TemporaryDirectory(prefix="shard-statistics-") as tmp:
            nodes = cluster_nodes.start_cluster(home, Path(tmp) / "cluster", count=3)
            try:
                report.update(measure(nodes[0].url, args.queries))
            finally:
                for running in cluster_nodes.running_nodes(Path(tmp) / "cluster"):
                    node.stop(running)
    report["load_average_at_end"] = load_average()
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["latency"], indent=2), f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
