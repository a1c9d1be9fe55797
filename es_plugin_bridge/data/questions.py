"""A question known only by its text: the id, title and body every layer derives the same way.

Readers, the sidecar's schemas and the bridge all turn one raw text field (``Title<p>body</p>``) into a
:class:`Question`; they must agree on the split and the id, so both live here, public, below them all.
"""

from __future__ import annotations

import hashlib
import re

from es_plugin_bridge.data.types import Question

# Stack Exchange renders a body from Markdown, so it always opens with a block-level tag. Titles are
# plain text and may hold things like "<package>" or "DbSet<MyEntity>", so splitting at the first
# '<' of any kind would cut such titles; splitting at the first block-level tag does not.
_BODY_START = re.compile(r"<(?:p|pre|blockquote|ul|ol|dl|h[1-6]|hr|div|table)(?=[\s>/])", re.IGNORECASE)


def question_id(title: str, body: str = "") -> str:
    """A stable short id for a question known only by its text: equal (title, body) share an id.

    Both parts are stripped first, so the same question reads the same from every format. A lone
    surrogate (not text) still hashes (``surrogatepass``: any other text's id is unchanged), so that the
    search that receives such a question can refuse it in one line (``text.sidecar_text``).
    """
    text = f"{title.strip()}\n{body.strip()}"
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def split_title_body(text: str) -> tuple[str, str]:
    """Split ``Title<p>body...</p>`` into (title, HTML body) at the first block-level HTML tag.

    Text without such a tag is all title. Both parts are stripped.
    """
    match = _BODY_START.search(text)
    if match is None:
        return text.strip(), ""
    return text[: match.start()].strip(), text[match.start() :].strip()


def question_from_text(text: str) -> Question:
    """A Question from one raw text field (a title, optionally followed by its HTML body)."""
    title, body = split_title_body(text)
    return Question(question_id(title, body), title, body)


__all__ = ["question_from_text", "question_id", "split_title_body"]
