"""How often Elasticsearch's template filling would meet ``${`` on real forum text.

Elasticsearch refuses an inference call whose filled template still holds ``${…}``
(``ValidatingSubstitutor.java``), and mode native sends every document of the window through the
template. This counts, on the shipped AskUbuntu sample (``val.tsv``: 1,804 questions with HTML bodies),
the questions that hold ``${`` and the share of BM25 top-``k`` windows (each question searching all the
others with the embedded engine, which scores as Lucene does) that hold at least one: without the
product's ``&#36;{`` encoding, that share of native searches would fail. Usage::

    python benchmarks/placeholder_windows.py [--window 100] [--out benchmarks/placeholder_windows.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tqdm import tqdm

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.rankers import RankerContext, TokenCache, build
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import rerank_text

ROOT = Path(__file__).resolve().parents[1]
VAL = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "placeholder_windows.json")
    args = ap.parse_args()
    start = time.perf_counter()
    questions = list(read_spec(f"pairs:{VAL}").questions.values())
    holding = {q.id for q in questions if "${" in q.title + q.body}
    context = RankerContext(collection=questions, tokens=TokenCache(Preprocessor()))
    bm25 = build("bm25", context)
    hit = 0
    for q in tqdm(questions, desc="BM25 windows", unit="query", file=sys.stderr):
        window = {doc for doc, _ in bm25.search(q, args.window, {q.id})}
        hit += bool(window & holding) or q.id in holding  # the query itself is sent too
    encoded = sum("${" in rerank_text(q) for q in questions)
    result = {
        "command": f"python benchmarks/placeholder_windows.py --window {args.window}",
        "questions": len(questions),
        "questions_with_placeholder": len(holding),
        "window": args.window,
        "searches_meeting_a_placeholder": hit,
        "share_of_searches": round(100 * hit / len(questions), 2),
        "rerank_texts_with_placeholder_after_encoding": encoded,
        "seconds": round(time.perf_counter() - start, 1),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
