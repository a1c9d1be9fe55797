"""HTML to text: forum bodies are HTML fragments (often unbalanced), SemEval text is plain with entities.

The result is plain text in which code and links may have been replaced by placeholder characters
(see :mod:`es_plugin_bridge.text.tokenize`) that the tokenizer turns into marker tokens.
"""

from __future__ import annotations

import html
import re
from typing import Literal

import lxml.etree
import lxml.html

from es_plugin_bridge.text.tokenize import CODE_MARK, URL_MARK

CodeMode = Literal["keep", "remove", "prefix"]

# A bare URL: a scheme or "www." up to the next whitespace, quote or angle bracket.
URL_RE = re.compile(r"\b(?:(?:https?|ftp)://|www\.)[^\s<>\"']+", re.IGNORECASE)

# Anchor text that is itself an address, even a mangled one ("ttp://..." seen in real bodies).
_ANCHOR_URL_RE = re.compile(r"\S*://\S*")

# Text is parsed as HTML only when it holds a real HTML tag or comment: plain text such as
# "if x<y then" or "#include <stdio.h>" would otherwise lose words to a made-up tag.
_HTML_NAMES = (
    "a|abbr|address|article|aside|b|big|blockquote|body|br|caption|center|cite|code|col|dd|del|details|"
    "dfn|div|dl|dt|em|figcaption|figure|font|footer|h[1-6]|head|header|hr|html|i|img|ins|kbd|li|main|mark|"
    "nav|ol|p|pre|q|s|samp|script|section|small|span|strike|strong|style|sub|summary|sup|table|tbody|td|"
    "tfoot|th|thead|tr|tt|u|ul|var"
)
_HTML_TAG_RE = re.compile(rf"<(?:/?(?:{_HTML_NAMES})(?:\s[^<>]*)?/?>|!--)", re.IGNORECASE)

# Tags whose content is not text at all.
_SKIP = frozenset({"script", "style", "head", "title", "noscript", "template"})
# Inline formatting tags, joined to their neighbours without a space ("un<b>usual</b>" is one
# word); every other tag (p, li, br, td, pre, kbd, ...) separates words.
_INLINE = frozenset({"b", "i", "em", "strong", "span", "sub", "sup", "u", "s", "strike", "del", "ins",
                     "font", "small", "big", "mark", "abbr", "tt"})
_CODE = frozenset({"pre", "code"})


def html_to_text(markup: str, *, code: CodeMode = "keep", links: bool = True) -> str:
    """Visible text of an HTML fragment, with ``<pre>``/``<code>`` and ``<a href>`` treated as asked.

    * ``code``: the content of the outermost ``<pre>`` or ``<code>`` element is kept, removed, or kept
      after a code placeholder (one per element: ``<pre><code>`` is one block).
    * ``links``: an ``<a href>`` element becomes a URL placeholder; its anchor text is kept after it
      unless that text is itself an address (a URL, or any ``://`` without spaces), so
      ``<a href="http://x">http://x</a>`` is one placeholder. Bare URLs are left to :func:`replace_urls`.

    Text holding at least one standard HTML tag (``<p>``, ``</a>``, ``<br/>``, ``<pre class="x">``...)
    or comment is parsed by lxml's forgiving HTML parser (unbalanced tags, stray ``<``, entities).
    Any other text is plain: only its entities are decoded, so ``x<y then`` or ``<stdio.h>`` keep their
    words (SemEval text, titles).
    """
    if "<" not in markup or not _HTML_TAG_RE.search(markup):
        return decode_entities(markup)
    try:
        root = lxml.html.fragment_fromstring(markup, create_parent="div")
    except lxml.etree.ParserError:  # nothing but whitespace or comments
        return ""
    out: list[str] = []
    _walk(root, out, code, links, in_code=False)
    return "".join(out)


def decode_entities(text: str) -> str:
    """Plain text (``html=False``): tags are left as text, entities such as ``&amp;`` are decoded."""
    return html.unescape(text) if "&" in text else text


def replace_urls(text: str) -> str:
    """Replace every bare URL by a URL placeholder."""
    if "://" not in text and "www." not in text.lower():
        return text
    return URL_RE.sub(f" {URL_MARK} ", text)


def _walk(el: lxml.html.HtmlElement, out: list[str], code: CodeMode, links: bool, in_code: bool) -> None:
    tag = el.tag
    if not isinstance(tag, str) or tag.lower() in _SKIP:  # comments, processing instructions
        if el.tail:
            out.append(el.tail)
        return
    tag = tag.lower()
    separate = tag not in _INLINE
    if separate:
        out.append(" ")
    keep_content = True
    if tag in _CODE and not in_code:
        in_code = True
        if code == "remove":
            keep_content = False
        elif code == "prefix":
            out.append(f" {CODE_MARK} ")
    if links and tag == "a" and el.get("href"):
        out.append(f" {URL_MARK} ")
        anchor = el.text_content().strip()
        if not anchor or URL_RE.fullmatch(anchor) or _ANCHOR_URL_RE.fullmatch(anchor):
            keep_content = False
    if keep_content:
        if el.text:
            out.append(el.text)
        for child in el:
            _walk(child, out, code, links, in_code)
    if separate:
        out.append(" ")
    if el.tail:
        out.append(el.tail)
