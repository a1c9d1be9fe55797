"""Snowball stemming through PyStemmer (the C implementation), with a word cache.

Forum vocabularies are Zipfian, so a dictionary lookup answers almost every call; the C stemmer,
which is not thread-safe, is only reached on a miss, under a lock (the sidecar serves from threads).
"""

from __future__ import annotations

import threading

import Stemmer

from es_plugin_bridge.text.arabic import is_arabic
from es_plugin_bridge.text.tokenize import MARKERS

MAX_CACHE = 500_000  # distinct words kept; a long stream of rare tokens restarts the cache


class CachedStemmer:
    """English Snowball stemmer, plus the Arabic one for Arabic-script words when ``arabic`` is set.

    Marker tokens (``__url__`` ...) are returned unchanged.
    """

    def __init__(self, arabic: bool = False) -> None:
        self._english = Stemmer.Stemmer("english")
        self._arabic = Stemmer.Stemmer("arabic") if arabic else None
        self._cache: dict[str, str] = {marker: marker for marker in MARKERS}
        self._lock = threading.Lock()

    def stem(self, token: str) -> str:
        """The stem of one token."""
        cached = self._cache.get(token)
        if cached is not None:
            return cached
        stemmer = self._arabic if self._arabic is not None and is_arabic(token) else self._english
        with self._lock:
            stemmed = stemmer.stemWord(token)
        if len(self._cache) >= MAX_CACHE:
            self._cache = {marker: marker for marker in MARKERS}
        self._cache[token] = stemmed
        return stemmed

    def stem_all(self, tokens: list[str]) -> list[str]:
        """The stems of a list of tokens, in order."""
        cache = self._cache
        return [cache[tok] if tok in cache else self.stem(tok) for tok in tokens]
