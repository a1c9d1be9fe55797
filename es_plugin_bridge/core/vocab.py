"""The models' vocabulary: token ↔ id, with counts and document frequencies, stored as JSON.

Built once from the training data so every model (and the exported model directory) maps text to
the same ids. Two ids are reserved: ``<pad>`` = 0 (fills short inputs; its embedding row is zero and
its mask is 0) and ``<unk>`` = 1 (every token below the minimum count). The order is deterministic:
count descending, then the token itself, so the same data always gives the same ids.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from es_plugin_bridge.errors import DataFormatError, UserError

PAD = "<pad>"
UNK = "<unk>"
PAD_ID = 0
UNK_ID = 1
FORMAT = "es_plugin_bridge.vocabulary"
VERSION = 1


class Vocabulary:
    """Token ids with their corpus count and document frequency (df).

    ``counts[i]`` / ``doc_freqs[i]`` are the token's total occurrences / number of documents containing
    it in the data the vocabulary was built from; for ``<unk>`` they sum over the tokens left out, for
    ``<pad>`` they are 0. ``n_docs`` is the number of documents seen.
    """

    def __init__(
        self,
        tokens: Sequence[str],
        counts: Sequence[int],
        doc_freqs: Sequence[int],
        n_docs: int,
        min_count: int = 1,
    ) -> None:
        if list(tokens[:2]) != [PAD, UNK]:
            raise ValueError(f"a vocabulary starts with {PAD!r}, {UNK!r}; got {list(tokens[:2])!r}")
        if not len(tokens) == len(counts) == len(doc_freqs):
            raise ValueError("tokens, counts and doc_freqs must have the same length")
        self.tokens: list[str] = list(tokens)
        self.index: dict[str, int] = {tok: i for i, tok in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            dupes = sorted(t for t, c in Counter(self.tokens).items() if c > 1)
            raise ValueError(f"duplicate tokens in vocabulary: {dupes[:5]!r}")
        self.counts = np.asarray(counts, dtype=np.int64)
        self.doc_freqs = np.asarray(doc_freqs, dtype=np.int64)
        self.n_docs = int(n_docs)
        self.min_count = int(min_count)

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def build(
        cls, docs: Iterable[Sequence[str]], min_count: int = 2, max_size: int | None = None
    ) -> Vocabulary:
        """Count tokens over ``docs`` (one token list per document) and keep those seen ``min_count`` times.

        ``max_size`` caps the number of ids (specials included), keeping the most frequent tokens.
        """
        if min_count < 1:
            raise UserError(f"min_count must be >= 1, got {min_count}")
        if max_size is not None and max_size < 2:
            raise UserError(f"max_size must be >= 2 (room for {PAD} and {UNK}), got {max_size}")
        counts: Counter[str] = Counter()
        dfs: Counter[str] = Counter()
        n_docs = 0
        for doc in docs:
            n_docs += 1
            counts.update(doc)
            dfs.update(set(doc))
        for special in (PAD, UNK):
            if special in counts:
                raise UserError(f"the data contains the reserved token {special!r}")
        ranked = sorted((tok for tok, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
        if max_size is not None:
            ranked = ranked[: max_size - 2]
        kept = set(ranked)
        unk_count = sum(c for tok, c in counts.items() if tok not in kept)
        unk_df = sum(d for tok, d in dfs.items() if tok not in kept)
        return cls(
            [PAD, UNK, *ranked],
            [0, unk_count, *(counts[t] for t in ranked)],
            [0, unk_df, *(dfs[t] for t in ranked)],
            n_docs,
            min_count,
        )

    # -- lookup ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: object) -> bool:
        return token in self.index

    def id(self, token: str) -> int:
        """The token's id, ``UNK_ID`` when it is not in the vocabulary."""
        return self.index.get(token, UNK_ID)

    def ids(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``, unknown ones mapped to ``UNK_ID``; never truncates."""
        get = self.index.get
        return [get(tok, UNK_ID) for tok in tokens]

    def encode(self, tokens: Sequence[str], max_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Ids and mask (1 for a real token, 0 for padding), both int64 arrays.

        Without ``max_len`` the arrays are exactly as long as ``tokens``. With it they are exactly
        ``max_len`` long: shorter inputs are padded with ``PAD_ID``, longer ones cut to their first
        ``max_len`` tokens. That cut is deliberate and only happens here, where the caller states the
        model's input cap (e.g. a body cut at 100 words, as in Lei et al.).
        """
        ids = self.ids(tokens)
        if max_len is None:
            return np.asarray(ids, dtype=np.int64), np.ones(len(ids), dtype=np.int64)
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        ids = ids[:max_len]
        out = np.full(max_len, PAD_ID, dtype=np.int64)
        mask = np.zeros(max_len, dtype=np.int64)
        out[: len(ids)] = ids
        mask[: len(ids)] = 1
        return out, mask

    def encode_batch(
        self, docs: Sequence[Sequence[str]], max_len: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Ids and mask of shape [len(docs), L], L = the longest doc (at least 1), capped at ``max_len``."""
        longest = max((len(d) for d in docs), default=0)
        width = max(1, longest if max_len is None else min(longest, max_len))
        ids = np.full((len(docs), width), PAD_ID, dtype=np.int64)
        mask = np.zeros((len(docs), width), dtype=np.int64)
        for row, doc in enumerate(docs):
            enc, m = self.encode(doc, width)
            ids[row] = enc
            mask[row] = m
        return ids, mask

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids``, padding dropped."""
        return [self.tokens[i] for i in ids if i != PAD_ID]

    # -- weights --------------------------------------------------------------------------------
    @property
    def idf(self) -> np.ndarray:
        """Per-id inverse document frequency, float32 [V], Lucene's BM25 form ``ln(1 + (N−df+0.5)/(df+0.5))``.

        That form (rather than ``ln(N/df)``) stays positive for words in most documents, so a weight
        initialised from it never starts negative or zero. ``<pad>`` gets 0; ``<unk>`` gets the idf of a
        word seen in one document, since each unknown word is individually rare (its pooled df would
        make it look common).
        """
        n = max(self.n_docs, 1)
        df = self.doc_freqs.astype(np.float64).copy()
        df[UNK_ID] = 1.0
        out = np.log1p((n - df + 0.5) / (df + 0.5))
        out[PAD_ID] = 0.0
        return out.astype(np.float32)

    # -- storage --------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "min_count": self.min_count,
            "n_docs": self.n_docs,
            "tokens": self.tokens,
            "counts": self.counts.tolist(),
            "doc_freqs": self.doc_freqs.tolist(),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write JSON atomically (temporary file in the same directory, then rename)."""
        path = Path(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.to_dict(), fh, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    @classmethod
    def from_dict(cls, data: object, source: str = "vocabulary") -> Vocabulary:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise DataFormatError(source, "format", f"not a vocabulary file (expected format {FORMAT!r})")
        if data.get("version") != VERSION:
            raise DataFormatError(source, "version", f"unsupported version {data.get('version')!r}")
        for key, kind in (("tokens", list), ("counts", list), ("doc_freqs", list), ("n_docs", int)):
            if not isinstance(data.get(key), kind):
                raise DataFormatError(source, key, f"missing or not a {kind.__name__}")
        if not all(isinstance(t, str) for t in data["tokens"]):
            raise DataFormatError(source, "tokens", "every token must be a string")
        try:
            return cls(
                data["tokens"], data["counts"], data["doc_freqs"], data["n_docs"], data.get("min_count", 1)
            )
        except (ValueError, TypeError) as exc:
            raise DataFormatError(source, "tokens", str(exc)) from None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Vocabulary:
        """Read a file written by :meth:`save`; a malformed file raises DataFormatError naming the field."""
        path = Path(path)
        if not path.is_file():
            raise UserError(f"vocabulary file not found: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise DataFormatError(str(path), "json", str(exc)) from None
        return cls.from_dict(data, str(path))


__all__ = ["PAD", "UNK", "PAD_ID", "UNK_ID", "Vocabulary"]
