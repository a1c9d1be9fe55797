"""What reranking 100 candidates costs in the sidecar, per exported model: a bi-encoder against a
cross-encoder, in process (``Service.rerank_json``, what ``/v1/rerank`` runs), on real SemEval-2016
dev questions (title + body) or AskUbuntu titles.

For each ``--model DIR``: the p50 and p90 milliseconds of one query against 100 candidates, uncached
(the cache cleared before every call: every text preprocessed and encoded) and cached (the same
request again: a bi-encoder then only scores, a cross-encoder still runs its 100 pairs).

Usage: ``python benchmarks/pair_cost.py --model DIR [--model DIR]... [--threads 2] [--repeats 10]
[--titles]``. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.serving.model_dir import ModelDirectory
from es_plugin_bridge.serving.schemas import RerankRequest
from es_plugin_bridge.serving.service import Service

ROOT = Path(__file__).resolve().parents[1]
SEMEVAL_DEV = ROOT / "es_plugin_bridge" / "samples" / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TITLES = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "train_titles.tsv"
CANDIDATES = 100


def _request(titles: bool) -> RerankRequest:
    """One real query and 100 real candidates."""
    if titles:
        ds = read_spec(f"pairs:{TITLES}")
        docs = list(ds.questions.values())[: CANDIDATES + 1]
    else:
        queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries
        found = {c.id: c for rq in queries for c in (rq.query, *rq.candidates)}
        docs = list(found.values())[: CANDIDATES + 1]
    as_json = [{"id": q.id, "title": q.title, "body": q.body} for q in docs]
    return RerankRequest.model_validate({"query": as_json[0], "documents": as_json[1:]})


def _timings(service: Service, req: RerankRequest, repeats: int, cached: bool) -> dict[str, float]:
    service.rerank_json(req)  # warm-up (and fills the cache)
    seconds = []
    for _ in range(repeats):
        if not cached:
            service.cache.clear()
        start = time.perf_counter()
        service.rerank_json(req)
        seconds.append(time.perf_counter() - start)
    ms = 1000 * np.asarray(seconds)
    return {f"p{q}_ms": round(float(np.percentile(ms, q)), 1) for q in (50, 90)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", required=True, type=Path,
                        help="an exported model directory")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--titles", action="store_true",
                        help="AskUbuntu titles instead of SemEval title + body")
    args = parser.parse_args()
    req = _request(args.titles)
    texts = "askubuntu titles" if args.titles else "semeval title + body"
    out: dict[str, Any] = {"machine": machine(threads=args.threads), "candidates": CANDIDATES, "texts": texts,
                           "models": {}}
    for path in args.model:
        model = ModelDirectory.load(path, threads=args.threads)
        service = Service(model)
        out["models"][str(path)] = {
            "model_type": model.model_type,
            "pairwise": model.pairwise,
            "uncached": _timings(service, req, args.repeats, cached=False),
            "cached": _timings(service, req, args.repeats, cached=True),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
