"""The cross-encoder reranking the bi-encoder's hybrid window, against the bi-encoder's own order.

A cross-encoder cannot search a collection (it scores a query with each candidate together), so in
production it reranks a first stage's window. The best window this product has is ``hybrid``: the
union of BM25's and the bi-encoder's top 100, fused with β. This script measures, on the AskUbuntu
test duplicates of ``benchmarks/paper_models.py``'s split searched among every distinct title:

- ``hybrid``: the bi-encoder's (``transformer``) hybrid order;
- ``cross@hybrid``: the same top ``--window`` of that order, reranked by the cross-encoder's score alone;
- ``cross@bm25``: BM25's top ``--window`` reranked by the cross-encoder's score alone.

``esrerank evaluate`` computes every metric (``evaluation.retrieval.evaluate_retrieval``); the two
cascades are given to it as rankers of this run. Usage (after ``paper_models.py`` trained both):
``python benchmarks/cross_encoder_window.py [--max-queries 500]`` → ``benchmarks/cross_encoder_window.json``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import machine  # noqa: E402

from es_plugin_bridge.data.spec import read_spec  # noqa: E402
from es_plugin_bridge.data.types import Question  # noqa: E402
from es_plugin_bridge.evaluation.retrieval import RetrievalProtocol, evaluate_retrieval, protocol_queries  # noqa: E402
from es_plugin_bridge.rankers import Ranker, RankerContext, TokenCache  # noqa: E402
from es_plugin_bridge.rankers import build as build_ranker  # noqa: E402
from es_plugin_bridge.rankers.scorers import open_scorer  # noqa: E402
from es_plugin_bridge.text import Preprocessor, TextOptions  # noqa: E402


class Cascade(Ranker):
    """The top ``window`` of another ranker's search, reordered by a pairwise model's score."""

    name = "cascade"

    def __init__(self, context: RankerContext, first: str, cross_dir: Path, window: int) -> None:
        super().__init__(context)
        self.first = build_ranker(first, context)
        self.scorer = open_scorer(cross_dir)
        self.window = window
        self.by_id = {q.id: q for q in context.collection}
        self.pairs = 0
        self.seconds = 0.0

    def search(self, query: Question, k: int, exclude: set[str] | None = None) -> list[tuple[str, float]]:
        hits = self.first.search(query, self.window, exclude)
        if not hits:
            return []
        candidates = [self.by_id[doc] for doc, _ in hits]
        started = time.perf_counter()
        scores = np.asarray(self.scorer.components(query, candidates)["neural"], dtype=np.float64)
        self.seconds += time.perf_counter() - started
        self.pairs += len(candidates)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(candidates[i].id, float(scores[i])) for i in order]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=HERE.parent / "runs" / "paper")
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--max-queries", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", type=Path, default=HERE / "cross_encoder_window.json")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    bi = args.runs / "askubuntu-transformer" / "model"
    cross = args.runs / "askubuntu-cross-encoder" / "model"
    for path in (bi, cross):
        if not (path / "config.json").is_file():
            parser.error(f"{path}: not trained yet (python benchmarks/paper_models.py --types transformer,"
                         "cross-encoder --datasets askubuntu)")
    test = read_spec(f"pairs:{args.runs / 'askubuntu' / 'test.tsv'}")
    corpus = read_spec(f"pairs:{args.data / 'askubuntu-pairs' / 'train_titles.tsv'}")
    protocol = RetrievalProtocol()
    queries, notes = protocol_queries(test.pairs, [test.pairs, corpus.pairs], protocol,
                                      max_queries=args.max_queries)
    documents = list({q.id: q for p in corpus.pairs for q in (p.q1, p.q2)}.values())
    cascades: dict[str, Cascade] = {}

    def cascade(first: str):
        def make(context: RankerContext) -> Ranker:
            cascades[first] = Cascade(context, first, cross, args.window)
            return cascades[first]
        return make

    # The two cascades stand in for rankers of this run (RankerContext.overrides): "dense" is the
    # cross-encoder over hybrid's window, "lmdirichlet" over BM25's; renamed below.
    names = {"hybrid": "hybrid", "dense": "cross@hybrid", "lmdirichlet": "cross@bm25", "bm25": "bm25"}
    started = time.perf_counter()
    result = evaluate_retrieval(
        documents, queries, list(names), TokenCache(Preprocessor(TextOptions())), model_dir=bi,
        context_options={"overrides": {"dense": cascade("hybrid"), "lmdirichlet": cascade("bm25")}},
        protocol=protocol,
    )
    seconds = time.perf_counter() - started
    rankers = {names[name]: {**{m: round(100 * v, 2) for m, v in res.metrics.items()},  # percent
                             "seconds": round(res.seconds, 1)}
               for name, res in result.rankers.items()}
    for first, c in cascades.items():
        rankers[f"cross@{first}"]["cross_encoder_pairs"] = c.pairs
        rankers[f"cross@{first}"]["cross_encoder_ms_per_100"] = round(1000 * c.seconds / c.pairs * 100, 1)
    report = {
        "command": "python benchmarks/cross_encoder_window.py " + shlex.join(argv or sys.argv[1:]),
        "machine": machine(),
        "bi_encoder": str(bi),
        "cross_encoder": str(cross),
        "window": args.window,
        "queries": len(queries),
        "notes": notes + result.notes,
        "seconds": round(seconds, 1),
        "rankers": rankers,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| ranker | acc@1 | acc@5 | acc@10 | mrr@10 | seconds |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, m in rankers.items():
        print(f"| {name} | {m['acc@1']:.2f} | {m['acc@5']:.2f} | {m['acc@10']:.2f} | {m['mrr@10']:.2f} "
              f"| {m['seconds']:.0f} |")


if __name__ == "__main__":
    main()
