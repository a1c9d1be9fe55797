"""A pasted log as a user pastes one into a search box: an AskUbuntu question's title, then the shell
and log lines (the ``<pre><code>`` blocks) of real AskUbuntu bodies from the shipped samples, one after
another, until the text is about 100 KB. Used by the tests of long queries (issue 34, item 3)."""

from __future__ import annotations

import html
import re
from pathlib import Path

VAL = Path(__file__).resolve().parents[1] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
#: Just under the sidecar's 100,000 characters of a text (``serving/schemas.py``, ``MAX_TEXT_CHARS``), so
#: the modes that send the query to the sidecar still rerank instead of falling back.
CHARS = 98_000
_CODE = re.compile(r"<pre><code>(.*?)</code></pre>", re.S)


def pasted_log(chars: int = CHARS) -> str:
    """The first question's title and then code blocks of the sample's bodies, cut at ``chars``."""
    rows = [line.split("\t") for line in VAL.read_text(encoding="utf-8").splitlines()]
    title = rows[0][1].split("<p>")[0]
    parts = [title]
    for row in rows:
        for side in row[1:]:
            parts += [html.unescape(block).strip() for block in _CODE.findall(side)]
        if sum(map(len, parts)) > chars:
            break
    return "\n".join(parts)[:chars]
