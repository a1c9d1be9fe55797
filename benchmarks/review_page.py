"""Review page benchmark: a report of 1,000 queries × 6 rankers opened and filtered in headless chromium.

The report is a real one, not a synthetic page: ``esrerank evaluate --task retrieval`` of 1,000
AskUbuntu duplicate queries (``../shared/data/askubuntu-pairs/train_titles.tsv``, real titles; the
packaged copy where ``../shared`` is missing) searched among the file's questions by the six first-stage
similarities (bm25, lmdirichlet, lmjelinekmercer, dfr, ib, tfidf), written with ``--report`` as
``report.html``: each query's text, six top-10 lists and every shown title inline.

Measured in Debian's chromium driven by playwright (as the browser tests are), each a median of
``--rounds`` fresh pages:

* ``open_ms``: navigation start to the page ready (its script has drawn the summary and every query's
  row: ``body[data-ready]``, seen by a MutationObserver installed before the page loads), from the page's
  own ``performance.now()``;
* ``filter_ms``: one filter applied and painted (the input event dispatched, then two animation frames):
  a text search, "only changed", "only losses", and the other ranker chosen;
* ``bytes``: the file's size.

Targets (issue 47): open and filter under 1 s, the file under 5 MB. Usage::

    python benchmarks/review_page.py [--queries 1000] [--rounds 5] [--out benchmarks/review_page.json]
        [--reuse DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import load_average, machine  # benchmarks/ is on sys.path when run as a script

from es_plugin_bridge.cli.main import main as esrerank

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "data" / "askubuntu-pairs" / "train_titles.tsv"
PACKAGED = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "train_titles.tsv"
RANKERS = ("bm25", "lmdirichlet", "lmjelinekmercer", "dfr", "ib", "tfidf")
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
TARGET_MS = 1000.0
TARGET_BYTES = 5 * 1024 * 1024
READY_OBSERVER = """
new MutationObserver((_, observer) => {
  if (document.body && document.body.dataset.ready) {
    window.__readyMs = performance.now(); observer.disconnect(); }
}).observe(document, {attributes: true, subtree: true, attributeFilter: ["data-ready"]});
"""
#: Each filter as the page's own controls apply it: set the control, dispatch its input event, wait for
#: two animation frames (the second runs after the first's paint).
FILTERS = {
    "text": {"id": "filter-text", "value": "install"},
    "only_changed": {"id": "only-changed", "checked": True},
    "only_losses": {"id": "only-losses", "checked": True},
    "other_ranker": {"id": "ranker-a", "option": 1},
}
APPLY = """async (f) => {
  const e = document.getElementById(f.id);
  const start = performance.now();
  if ("value" in f) e.value = f.value; else if ("checked" in f) e.checked = f.checked;
  else e.value = e.options[f.option].value;
  e.dispatchEvent(new Event("input", {bubbles: true}));
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const rows = document.querySelectorAll("#queries tbody tr:not([hidden])").length;
  return {ms: performance.now() - start, rows};
}"""


def _esrerank(argv: list[str]) -> None:
    try:
        esrerank(argv)
    except SystemExit as exc:
        if exc.code:
            sys.exit(f"esrerank {argv[0]} failed ({exc.code})")


def build_report(data: Path, queries: int, out: Path) -> tuple[Path, float]:
    """``evaluate --report`` of ``queries`` retrieval queries with the six similarities; its page and the
    seconds the run took. Where ``out`` already holds the run (``--reuse``), only the page is written
    again from its ``review.json`` (``esrerank report``), with the page's code as it is now."""
    start = time.perf_counter()
    if (out / "review.json").is_file() and (out / "run.json").is_file():
        _esrerank(["report", str(out), "--out", str(out / "report.html")])
        return out / "report.html", 0.0
    _esrerank(["evaluate", "--task", "retrieval", "--queries", f"pairs:{data}", "--max-queries",
               str(queries), "--rankers", ",".join(RANKERS), "--json", str(out / "run.json"),
               "--report", str(out), "--no-progress"])
    return out / "report.html", time.perf_counter() - start


def measure(page_path: Path, rounds: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    opens: list[float] = []
    filters: dict[str, list[float]] = {name: [] for name in FILTERS}
    rows: dict[str, int] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for _ in range(rounds):
                # a fresh page per filter: each starts from the state the page opens in
                for name, control in FILTERS.items():
                    page = browser.new_page()
                    page.route("**/*", lambda r: r.continue_() if r.request.url == page_path.as_uri()
                               else r.abort())
                    page.add_init_script(READY_OBSERVER)
                    page.goto(page_path.as_uri())
                    page.wait_for_selector("body[data-ready='1']")
                    opens.append(page.evaluate("() => window.__readyMs"))
                    answer = page.evaluate(APPLY, control)
                    filters[name].append(answer["ms"])
                    rows[name] = answer["rows"]
                    page.close()
        finally:
            browser.close()
    return {"open_ms": round(statistics.median(opens), 1), "open_ms_max": round(max(opens), 1),
            "filter_ms": {name: round(statistics.median(v), 1) for name, v in filters.items()},
            "filter_ms_max": round(max(max(v) for v in filters.values()), 1),
            "rows_after_filter": rows, "pages_opened": len(opens)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "review_page.json")
    parser.add_argument("--reuse", type=Path, metavar="DIR",
                        help="Keep the run in DIR and, where DIR already holds it, only rebuild its page.")
    args = parser.parse_args()
    data = SHARED if SHARED.is_file() else PACKAGED
    report: dict[str, Any] = {"machine": machine(), "data": str(data.relative_to(ROOT.parent)),
                              "rankers": list(RANKERS)}
    with tempfile.TemporaryDirectory() as tmp:
        where = args.reuse or Path(tmp)
        page, seconds = build_report(data, args.queries, where)
        run = json.loads((where / "run.json").read_text())
        size = page.stat().st_size
        print(f"report: {run['n_queries']} queries × {len(run['rankers'])} rankers, {size / 1e6:.2f} MB "
              f"(evaluate took {seconds:.0f} s; 0: reused)", flush=True)
        timings = measure(page, args.rounds)
    report.update({
        "queries": run["n_queries"], "n_rankers": len(run["rankers"]), "bytes": size,
        "megabytes": round(size / (1024 * 1024), 2), "evaluate_seconds": round(seconds, 1), **timings,
        "targets": {"open_ms": TARGET_MS, "filter_ms": TARGET_MS, "bytes": TARGET_BYTES},
        "meets_targets": timings["open_ms_max"] < TARGET_MS and timings["filter_ms_max"] < TARGET_MS
                         and size < TARGET_BYTES,
        "load_average_at_end": load_average(),
        "command": " ".join(["python", "benchmarks/review_page.py", *sys.argv[1:]]),
    })
    print(f"open: median {timings['open_ms']} ms (max {timings['open_ms_max']}); filter: "
          + ", ".join(f"{k} {v} ms" for k, v in timings["filter_ms"].items())
          + f" (max {timings['filter_ms_max']}); {report['megabytes']} MiB; targets met: "
          f"{report['meets_targets']}")
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
