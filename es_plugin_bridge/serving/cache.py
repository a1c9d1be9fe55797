"""A bounded LRU of candidate encodings, so a candidate seen before costs no encoder call.

Elasticsearch sends the same popular questions again and again (every query's window overlaps the
last), and the encoder is most of a request's cost. An entry is the candidate's neural vector (for a
cross-encoder, which runs every pair anew: its sub-word side of a pair) and its bag of words, keyed
by a hash of the model (its manifest digest) and the *preprocessed* text (the capped token ids the
encoder sees): two spellings that preprocess alike share an entry, and a cache
can never serve one model's vectors for another. A second, equally bounded map from a digest of the
*raw* text to that key spares a text seen before its preprocessing too (HTML parsing, tokenising and
stemming 100 title+body candidates costs several milliseconds, more than the whole cached answer);
short texts are their own key there (exact), long ones a sha256 digest, so its memory stays bounded.

Thread-safe: one lock around both maps; hits and misses are counted for ``/metrics``. Entries are
copies marked read-only, so no caller can change what another will read.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence

import numpy as np

Encoding = tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]  # (vector [D] or pair side, (bow ids, weights))


def encoding_key(model_key: bytes, token_ids: Sequence[Sequence[int]]) -> bytes:
    """Digest of the model and a question's token ids (title, body), unambiguous across the parts."""
    h = hashlib.blake2b(model_key, digest_size=16)
    for part in token_ids:
        ids = np.asarray(part, dtype=np.int64)
        h.update(len(ids).to_bytes(8, "little"))
        h.update(ids.tobytes())
    return h.digest()


#: Raw texts up to this many characters are their own alias key (exact, and cheaper than any digest).
RAW_KEY_CHARS = 2048


def raw_key(model_key: bytes, title: str, body: str) -> Hashable:
    """The alias key of a question's raw text (before preprocessing): the text itself when short, else a
    sha256 of the model and the text (the title's length keeps ("ab", "c") and ("a", "bc") apart). One
    cache serves one model, so the short form needs no model key."""
    if len(title) + len(body) <= RAW_KEY_CHARS:
        return (title, body)
    data = f"{len(title)}:{title}{body}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(model_key + data).digest()


def _frozen(array: np.ndarray) -> np.ndarray:
    out = np.array(array, copy=True)
    out.flags.writeable = False
    return out


class EncodingCache:
    """LRU of at most ``capacity`` encodings (0 disables it: every lookup misses, nothing is kept)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"cache capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, Encoding] = OrderedDict()
        self._aliases: OrderedDict[Hashable, Hashable] = OrderedDict()  # raw-text key -> encoding key
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def record(self, hits: int, misses: int) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses

    def get_raw(self, keys: Sequence[Hashable]) -> list[tuple[Hashable, Encoding] | None]:
        """(encoding key, encoding) of each raw-text key seen before, or None (not counted)."""
        out: list[tuple[Hashable, Encoding] | None] = []
        with self._lock:
            for key in keys:
                alias = self._aliases.get(key) if self.capacity else None
                entry = self._entries.get(alias) if alias is not None else None
                if entry is not None:
                    self._aliases.move_to_end(key)
                    self._entries.move_to_end(alias)
                    out.append((alias, entry))
                else:
                    out.append(None)
        return out

    def get_many(self, keys: Sequence[Hashable]) -> list[Encoding | None]:
        """The cached encoding of each encoding key, or None; found entries become the most recent."""
        out: list[Encoding | None] = []
        with self._lock:
            for key in keys:
                entry = self._entries.get(key) if self.capacity else None
                if entry is not None:
                    self._entries.move_to_end(key)
                out.append(entry)
        return out

    def put_many(self, items: Sequence[tuple[Hashable, Encoding]],
                 aliases: Sequence[tuple[Hashable, Hashable]] = ()) -> None:
        """Store encodings (copied, read-only) and raw-text aliases of their keys, evicting the least
        recently used beyond capacity."""
        if not self.capacity:
            return
        frozen = [(key, (_frozen(vec), (_frozen(bag[0]), _frozen(bag[1])))) for key, (vec, bag) in items]
        with self._lock:
            for key, entry in frozen:
                self._entries[key] = entry
                self._entries.move_to_end(key)
            for alias, key in aliases:
                self._aliases[alias] = key
                self._aliases.move_to_end(alias)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
            while len(self._aliases) > self.capacity:
                self._aliases.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._aliases.clear()
