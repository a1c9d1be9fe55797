"""The preprocessing pipeline: raw question text to the token lists every ranker and model consumes."""

from __future__ import annotations

import re
from typing import Any

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.text import stopwords
from es_plugin_bridge.text.arabic import normalize_arabic
from es_plugin_bridge.text.markup import decode_entities, html_to_text, replace_urls
from es_plugin_bridge.text.normalize import normalize_numbers, replace_dates
from es_plugin_bridge.text.options import TextOptions
from es_plugin_bridge.text.stem import CachedStemmer
from es_plugin_bridge.text.tokenize import INPUT_TABLE, tokenize

_NEEDS_CLEANING = re.compile("[" + "".join(chr(cp) for cp in INPUT_TABLE) + "]")


class Preprocessor:
    """Turns questions and texts into tokens following one :class:`TextOptions`.

    Steps, in order (each one only when its option asks for it):

    1. input cleaning (always): control characters become spaces, typographic apostrophes become ``'``;
    2. ``html``: HTML to text, applying ``code`` to ``<pre>``/``<code>`` and ``links`` to ``<a href>``
       (without ``html`` only the entities are decoded);
    3. ``links``: bare URLs become ``__url__``;
    4. ``dates``: dates become ``__date__``;
    5. ``arabic``: Arabic orthographic normalisation;
    6. ``lowercase``;
    7. tokenising (:func:`es_plugin_bridge.text.tokenize.tokenize`);
    8. ``numbers``: number tokens become ``__num__``;
    9. ``stopwords``: English stop words are dropped (and Arabic ones with ``arabic``), compared lowercased;
    10. ``stem``: Snowball stems (English; Arabic-script tokens with the Arabic stemmer when ``arabic``);
    11. bodies only: the first ``body_words`` tokens are kept (``None``: all).

    Marker tokens (``__url__``, ``__code__``, ``__num__``, ``__date__``) pass every later step unchanged
    and count as words for the body cut. One instance may be shared between threads.
    """

    def __init__(self, options: TextOptions | None = None) -> None:
        self.options = options if options is not None else TextOptions()
        opts = self.options
        self._stemmer = CachedStemmer(arabic=opts.arabic) if opts.stem else None
        self._stopwords = stopwords.ENGLISH | stopwords.ARABIC if opts.arabic else stopwords.ENGLISH

    def text_tokens(self, text: str) -> list[str]:
        """Tokens of any text (title, body, comment, query), never cut."""
        opts = self.options
        if _NEEDS_CLEANING.search(text):
            text = text.translate(INPUT_TABLE)
        text = html_to_text(text, code=opts.code, links=opts.links) if opts.html else decode_entities(text)
        if opts.links:
            text = replace_urls(text)
        if opts.dates:
            text = replace_dates(text)
        if opts.arabic:
            text = normalize_arabic(text)
        if opts.lowercase:
            text = text.lower()
        tokens = tokenize(text)
        if opts.numbers:
            tokens = normalize_numbers(tokens)
        if opts.stopwords:
            stop = self._stopwords
            if opts.lowercase:
                tokens = [tok for tok in tokens if tok not in stop]
            else:
                tokens = [tok for tok in tokens if tok.lower() not in stop]
        if self._stemmer is not None:
            tokens = self._stemmer.stem_all(tokens)
        return tokens

    def title_tokens(self, q: Question) -> list[str]:
        """Tokens of the question's title."""
        return self.text_tokens(q.title)

    def body_tokens(self, q: Question) -> list[str]:
        """Tokens of the question's body cut at ``body_words``; empty when ``use_body`` is False."""
        if not self.options.use_body or not q.body:
            return []
        tokens = self.text_tokens(q.body)
        limit = self.options.body_words
        return tokens if limit is None else tokens[:limit]

    def tokens(self, q: Question) -> list[str]:
        """Title tokens followed by the (cut) body tokens."""
        return self.title_tokens(q) + self.body_tokens(q)

    def __repr__(self) -> str:
        return f"Preprocessor({self.options!r})"

    # Pickle the options only (the C stemmer objects cannot be pickled), e.g. for worker processes.
    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]
