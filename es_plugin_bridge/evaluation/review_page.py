"""The review page: one self-contained HTML file (styles, script and data inline) from run bundles.

Why one file with everything inside: it is mailed, attached to an issue or opened from a laptop with no
network, and it must never fetch anything (no CDN, no font, no request). The script and styles live in
``review_assets/`` as package data so they are edited as JS and CSS; this module only assembles them
with the bundle (``evaluation.review_data``) as an inline JSON block.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from es_plugin_bridge.evaluation.report import write_atomic

PAGE_NAME = "report.html"

_BODY = """<h1>{title}</h1>
<p class="note">Task {task}, {n} queries, main metric {metric}.
Written by esrerank; all figures in percent.</p>
<div id="refusals"></div>
<h2>Summary</h2><div id="summary"></div><p class="note" id="methods"></p>
<h2>Queries by contrast</h2>
<div class="controls"><label>ranker <select id="ranker-a"></select></label>
<label>against <select id="ranker-b"></select></label>
<label>search <input type="search" id="filter-text" placeholder="query text or id"></label>
<label><input type="checkbox" id="only-changed"> only changed</label>
<label><input type="checkbox" id="only-losses"> only losses</label>
<span class="note" id="query-count"></span></div>
<p class="note">j / k or the arrow keys move, Enter opens; the known duplicate's rank under each ranker,
its movement, the difference of the main metric, and the top-10 overlap (Jaccard, RBO p = 0.9).</p>
<table id="queries"><thead><tr><th scope="col">query</th><th scope="col">rank (ranker)</th>
<th scope="col">rank (against)</th><th scope="col">movement</th><th scope="col">Δ metric</th>
<th scope="col">Jaccard@10</th><th scope="col">RBO@10</th></tr></thead><tbody></tbody></table>
<h2>One query</h2><div id="detail"><p class="note">Click a query or press Enter.</p></div>
<h2>Judging</h2><p><span id="judged-count">0 judgments made</span>
<button type="button" id="download">download judgments</button></p>
<p class="note">The file is a <code>pairs:</code> TSV (label, query, candidate): read it back with
<code>esrerank evaluate --task classify --data pairs:judgments.tsv ...</code> or train on it.</p>
<h2>Input signature</h2><div id="signature"></div>
"""


def _asset(name: str) -> str:
    return resources.files("es_plugin_bridge.evaluation").joinpath("review_assets", name).read_text("utf-8")


def render(data: Mapping[str, Any], title: str = "") -> str:
    """The page as one string; ``</`` in the data is escaped so no text can close the script block."""
    title = title or f"Review: {data['task']}, {data['n_queries']} queries"
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    body = _BODY.format(title=html.escape(title), task=html.escape(data["task"]), n=data["n_queries"],
                        metric=html.escape(data["metric"]))
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{html.escape(title)}</title><style>{_asset('review.css')}</style></head><body>{body}"
            f"<script type='application/json' id='review-data'>{payload}</script>"
            f"<script>{_asset('review.js')}</script></body></html>\n")


def write_page(data: Mapping[str, Any], path: Path, title: str = "") -> Path:
    """Write the page atomically (no partial file on a failure)."""
    page = render(data, title)
    return write_atomic(Path(path), lambda f: f.write(page))
