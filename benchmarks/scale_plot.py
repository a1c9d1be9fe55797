"""Draw ``benchmarks/scale.json`` (``benchmarks/scale.py``'s ladder) as ``docs/img/scale.png``: what a
collection's size costs on one node, for a person who would rather look than read.

Left: indexing questions/s per rung (client embedding, ingest embedding, text only, the encoder alone,
``es index --vectors`` of an ``esrerank embed`` file). Right: each system's p50 search latency at 1 client
per rung, the first stage dashed. Both axes logarithmic where the rungs span decades.

Usage: ``python benchmarks/scale_plot.py [--json benchmarks/scale.json] [--out docs/img/scale.png]``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def indexing_rates(rungs: list[dict[str, Any]]) -> dict[str, list[float | None]]:
    """Questions/s per rung of each way to index (None where a rung lacks it)."""
    def rate(rung: dict[str, Any], *path: str) -> float | None:
        node: Any = rung
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return float(node) if isinstance(node, int | float) else None

    ways = {"client embedding (es index)": ("indexing", "client_embedding", "questions_per_second"),
            "ingest embedding (ml-commons)": ("indexing", "ingest_embedding", "questions_per_second"),
            "text only": ("indexing", "text_only", "questions_per_second"),
            "the encoder alone (no index)": ("encoder_alone", "questions_per_second"),
            "es index --vectors (embedded once)": ("embed_once", "index_questions_per_second")}
    return {name: [rate(r, *path) for r in rungs] for name, path in ways.items()}


def latencies(rungs: list[dict[str, Any]], clients: str = "1") -> dict[str, list[float | None]]:
    """p50 ms per rung of each system at ``clients`` concurrent clients."""
    systems = sorted({name for r in rungs for name in r.get("latency_ms", {})})
    return {name: [r.get("latency_ms", {}).get(name, {}).get(clients, {}).get("p50") for r in rungs]
            for name in systems}


def draw(report: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # a rung stopped during its last phase (the HNSW twins) still has every figure drawn here
    rungs = [r for r in report["rungs"] if r.get("finished") or r.get("latency_ms")]
    if not rungs:
        raise SystemExit("scale.json holds no rung with its latencies measured: nothing to draw")
    sizes = [r["questions"] for r in rungs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name, values in indexing_rates(rungs).items():
        points = [(s, v) for s, v in zip(sizes, values, strict=True) if v is not None]
        if points:
            left.plot(*zip(*points, strict=True), marker="o", label=name)
    left.set(xscale="log", yscale="log", xlabel="questions in the index", ylabel="questions/s",
             title="Indexing")
    for name, values in latencies(rungs).items():
        points = [(s, v) for s, v in zip(sizes, values, strict=True) if v is not None]
        if points:
            right.plot(*zip(*points, strict=True), marker="o", label=name,
                       linestyle="--" if name == "first_stage" else "-")
    right.set(xscale="log", yscale="log", xlabel="questions in the index", ylabel="p50 ms, 1 client",
              title="Search latency (caches off)")
    for axis in (left, right):
        axis.set_xticks(sizes, [f"{s:,}" for s in sizes])
        axis.legend(fontsize=7)
        axis.grid(alpha=0.3, which="both")
    model = report.get("model", {})
    title = f"{report.get('node', 'OpenSearch')}; model {model.get('name')} ({model.get('dimension')}-d)"
    fig.suptitle(f"{title}; {report.get('cores')} cores", fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=HERE / "scale.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "scale.png")
    args = parser.parse_args()
    draw(json.loads(args.json.read_text(encoding="utf-8")), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
