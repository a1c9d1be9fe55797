"""A small, exactly specified regex tokenizer and the marker tokens the cleaning steps insert.

What :func:`tokenize` does, completely:

* A *word* is a run of letters, digits and combining marks (any script: Latin, Arabic, ...; the
  underscore is not a word character). Runs joined by exactly one connector stay one token:
  an apostrophe (``don't``, ``ubuntu's``), a dot (``12.04``, ``askubuntu.com``, ``e.g``), a hyphen
  (``wi-fi``, ``apt-get``, ``2015-03-12``), an underscore (``x86_64``, ``__init__`` gives ``init``),
  or a comma between two digits (``1,000``). ``wi-fi`` and ``wifi`` therefore stay different tokens.
* Everything else (punctuation, symbols, whitespace, a connector at either end of a word or two in a
  row) separates tokens and is dropped: ``"Hello, world!"`` gives ``["Hello", "world"]`` and
  ``"e.g."`` gives ``["e.g"]``.
* The placeholder characters the cleaning steps put in the text (Unicode private-use code points,
  removed from the input first so a user cannot forge them) come out as the marker tokens
  ``__url__``, ``__code__`` and ``__date__``; these are never lowercased, stemmed, cut up or dropped
  as stop words. ``__num__`` is produced after tokenising.

Case is left as it is (lowercasing is its own step).
"""

from __future__ import annotations

import re
import unicodedata

URL_TOKEN = "__url__"
CODE_TOKEN = "__code__"
NUM_TOKEN = "__num__"
DATE_TOKEN = "__date__"
MARKERS = frozenset({URL_TOKEN, CODE_TOKEN, NUM_TOKEN, DATE_TOKEN})

# One private-use character per marker, surrounded by spaces where it is inserted.
URL_MARK = "\ue001"
CODE_MARK = "\ue002"
DATE_MARK = "\ue003"
_MARK_TOKENS = {URL_MARK: URL_TOKEN, CODE_MARK: CODE_TOKEN, DATE_MARK: DATE_TOKEN}

# Input cleaning: drop any placeholder look-alike and the C0 control characters (not text, and
# rejected by lxml), and unify typographic apostrophes so "don’t" and "don't" are the same token.
INPUT_TABLE: dict[int, str | None] = {cp: None for cp in range(0xE000, 0xE010)}
INPUT_TABLE.update({cp: " " for cp in range(0x20) if chr(cp) not in "\t\n\r"})
INPUT_TABLE.update({ord("\u2019"): "'", ord("\u2018"): "'", ord("\u02bc"): "'"})


def _combining_marks() -> str:
    """A regex class body of the combining marks (category M*) of the Basic Multilingual Plane.

    ``\\w`` does not match them, so without this the Arabic harakat (and Latin accents written as
    separate code points) would split words. The BMP holds every mark of the scripts we meet; scanning
    it takes ~10 ms at import where the whole range would take ~150 ms.
    """
    ranges: list[tuple[int, int]] = []
    for cp in range(0x10000):
        if unicodedata.category(chr(cp)).startswith("M"):
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    return "".join(f"\\u{lo:04x}-\\u{hi:04x}" if lo != hi else f"\\u{lo:04x}" for lo, hi in ranges)


_WORD = f"(?:[^\\W_]|[{_combining_marks()}])+"  # letters and digits of any script, combining marks
_CONNECTOR = r"(?:['._\-]|(?<=\d),(?=\d))"
TOKEN_RE = re.compile(f"[{''.join(_MARK_TOKENS)}]|{_WORD}(?:{_CONNECTOR}{_WORD})*")


def tokenize(text: str) -> list[str]:
    """Split text into tokens as described in the module docstring (placeholders become markers)."""
    tokens = TOKEN_RE.findall(text)
    if URL_MARK in text or CODE_MARK in text or DATE_MARK in text:
        tokens = [_MARK_TOKENS.get(tok, tok) for tok in tokens]
    return tokens
