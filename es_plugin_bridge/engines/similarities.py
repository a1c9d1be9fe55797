"""Lucene 8's similarities, vectorised over postings, with Elasticsearch's parameter names.

Each class scores every (term, document) posting of an index at once, with boost 1, following
the operation order and float/double precision of Lucene 8.8 (read from its bytecode):
``BM25Similarity`` and ``ClassicSimilarity`` work in float32; the ``SimilarityBase`` family
(LM-Dirichlet, LM-Jelinek-Mercer, DFR, IB) works in float64 and rounds each term's score to
float32. Document lengths are the lossy one-byte norms of :mod:`.norms`.

Differences from Elasticsearch worth knowing: Elasticsearch's ``BM25`` is Lucene's
``LegacyBM25Similarity``, whose scores are these times ``k1 + 1`` (same ranking); and
Elasticsearch no longer offers classic TF-IDF (``tfidf`` here is Lucene 8's ``ClassicSimilarity``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from es_plugin_bridge.engines.norms import LENGTH_TABLE
from es_plugin_bridge.errors import UserError

F32 = np.float32


@dataclass(frozen=True)
class PostingStats:
    """What a similarity sees of an index: one entry per posting, per term, and for the field.

    ``doc_count`` counts documents with at least one token (Lucene's ``docCount``);
    ``sum_total_term_freq`` is the number of tokens in the whole field.
    """

    freq: NDArray[np.float32]  # per posting: occurrences of the term in the document
    norm: NDArray[np.uint8]  # per posting: the document's norm byte
    term: NDArray[np.int64]  # per posting: the term's row
    doc_freq: NDArray[np.int64]  # per term
    total_term_freq: NDArray[np.int64]  # per term
    doc_count: int
    sum_total_term_freq: int

    def freq64(self) -> NDArray[np.float64]:
        """Term frequencies as float64: the SimilarityBase family computes in double."""
        return self.freq.astype(np.float64)

    def posting_length(self) -> NDArray[np.float64]:
        """Decoded (lossy) document length of each posting, as Lucene's ``getLengthValue``."""
        return LENGTH_TABLE[self.norm].astype(np.float64)


class Similarity(ABC):
    """A scoring function with validated parameters; ``params`` holds them under their ES names."""

    name: ClassVar[str]
    defaults: ClassVar[dict[str, Any]]

    def __init__(self, **params: Any) -> None:
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            allowed = ", ".join(sorted(self.defaults)) or "none"
            raise UserError(
                f"similarity {self.name!r}: unknown parameter {unknown[0]!r} (allowed: {allowed})"
            )
        self.params: dict[str, Any] = {**self.defaults, **params}
        self._validate()

    @abstractmethod
    def _validate(self) -> None:
        """Check parameters, raising UserError naming the bad one."""

    def _number(self, key: str, ok: Callable[[float], bool], rule: str) -> float:
        value = self.params[key]
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise UserError(
                f"similarity {self.name!r}: parameter {key!r} must be a number, got {value!r}"
            ) from None
        if not math.isfinite(number) or not ok(number):
            raise UserError(f"similarity {self.name!r}: parameter {key!r} must be {rule}, got {value!r}")
        self.params[key] = number
        return number

    def _choice(self, key: str, choices: tuple[str, ...]) -> str:
        value = str(self.params[key]).lower()
        if value not in choices:
            raise UserError(
                f"similarity {self.name!r}: parameter {key!r} must be one of {', '.join(choices)}, "
                f"got {self.params[key]!r}"
            )
        self.params[key] = value
        return value

    @abstractmethod
    def score(self, stats: PostingStats, boost: float = 1.0) -> NDArray[np.float32]:
        """The float32 score of every posting for a query clause of this boost.

        Lucene rewrites a token repeated c times in a query into one clause of boost c, and the
        boost enters the formula before rounding, so it is applied here rather than afterwards.
        """

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"


class BM25(Similarity):
    """Lucene 8 ``BM25Similarity``: idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)), no (k1 + 1)."""

    name = "bm25"
    defaults: ClassVar[dict[str, Any]] = {"k1": 1.2, "b": 0.75}

    def _validate(self) -> None:
        self._number("k1", lambda v: v >= 0, "a finite number >= 0")
        self._number("b", lambda v: 0 <= v <= 1, "in [0, 1]")

    def score(self, stats: PostingStats, boost: float = 1.0) -> NDArray[np.float32]:
        k1, b = F32(self.params["k1"]), F32(self.params["b"])
        df = stats.doc_freq.astype(np.float64)
        idf = np.log(1.0 + (stats.doc_count - df + 0.5) / (df + 0.5)).astype(F32)
        avgdl = F32(stats.sum_total_term_freq / stats.doc_count)
        cache = F32(1) / (k1 * ((F32(1) - b) + b * LENGTH_TABLE / avgdl))  # one entry per norm byte
        weight = (F32(boost) * idf)[stats.term]
        return weight - weight / (F32(1) + stats.freq * cache[stats.norm])


class TFIDF(Similarity):
    """Lucene 8 ``ClassicSimilarity``: sqrt(tf) * (1 + ln((N + 1) / (df + 1))) / sqrt(dl).

    Since Lucene 7 (no query norm) idf appears once, not squared.
    """

    name = "tfidf"
    defaults: ClassVar[dict[str, Any]] = {}

    def _validate(self) -> None:
        """ClassicSimilarity has no parameter."""

    def score(self, stats: PostingStats, boost: float = 1.0) -> NDArray[np.float32]:
        idf = (np.log((stats.doc_count + 1.0) / (stats.doc_freq + 1.0)) + 1.0).astype(F32)
        norm_table = (
            1.0 / np.sqrt(LENGTH_TABLE.astype(np.float64), where=LENGTH_TABLE > 0, out=np.ones(256))
        ).astype(F32)
        norm_table[0] = F32(1) / norm_table[255]
        tf = np.sqrt(stats.freq.astype(np.float64)).astype(F32)
        return (tf * (F32(boost) * idf)[stats.term]) * norm_table[stats.norm]


def _collection_probability(stats: PostingStats) -> NDArray[np.float64]:
    """Lucene's ``DefaultCollectionModel``: (ttf + 1) / (field tokens + 1), per posting."""
    return (stats.total_term_freq[stats.term] + 1.0) / (stats.sum_total_term_freq + 1.0)


class LMDirichlet(Similarity):
    """Lucene 8 ``LMDirichletSimilarity``; a term's score is clamped at 0, as Lucene 8 does."""

    name = "lmdirichlet"
    defaults: ClassVar[dict[str, Any]] = {"mu": 2000.0}

    def _validate(self) -> None:
        self._number("mu", lambda v: v > 0, "a finite number > 0")

    def score(self, stats: PostingStats, boost: float = 1.0) -> NDArray[np.float32]:
        mu = float(F32(self.params["mu"]))
        p = _collection_probability(stats)
        raw = boost * (np.log(1.0 + stats.freq64() / (mu * p)) + np.log(mu / (stats.posting_length() + mu)))
        return np.maximum(raw, 0.0).astype(F32)


class LMJelinekMercer(Similarity):
    """Lucene 8 ``LMJelinekMercerSimilarity``; ``lambda`` defaults to 0.1 as in Elasticsearch.

    From Python pass it as ``lambda_=0.7`` or ``**{"lambda": 0.7}``.
    """

    name = "lmjelinekmercer"
    defaults: ClassVar[dict[str, Any]] = {"lambda": 0.1}

    def _validate(self) -> None:
        self._number("lambda", lambda v: 0 < v <= 1, "in (0, 1]")

    def score(self, stats: PostingStats, boost: float = 1.0) -> NDArray[np.float32]:
        lam = F32(self.params["lambda"])
        one_minus = float(F32(1) - lam)
        p = _collection_probability(stats)
        raw = boost * np.log(1.0 + (one_minus * stats.freq64() / stats.posting_length()) / (float(lam) * p))
        return raw.astype(F32)


def _log2(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.log(x) / math.log(2.0)


# Term-frequency normalisations shared by DFR and IB, keyed by Elasticsearch's names; each takes
# (stats, freq, length, avgdl, parameter) and returns tfn. "h3"'s parameter is Lucene's mu.
NORMALIZATION_PARAMS = {
    "no": None,
    "h1": ("normalization.h1.c", 1.0),
    "h2": ("normalization.h2.c", 1.0),
    "h3": ("normalization.h3.c", 800.0),
    "z": ("normalization.z.z", 0.3),
}


def _tfn(kind: str, value: float | None, stats: PostingStats) -> NDArray[np.float64]:
    freq = stats.freq64()
    if kind == "no":
        return freq
    length = stats.posting_length()
    avgdl = stats.sum_total_term_freq / stats.doc_count
    param = float(F32(value))
    if kind == "h1":
        return (freq * param) * (avgdl / length)
    if kind == "h2":
        return freq * _log2(1.0 + (param * avgdl) / length)
    if kind == "h3":  # Lucene computes the collection probability here in float32
        ttf = stats.total_term_freq[stats.term].astype(F32)
        prob = (ttf + F32(1)) / (F32(stats.sum_total_term_freq) + F32(1))
        return (freq + (F32(param) * prob).astype(np.float64)) / (length + param) * param
    return freq * np.power(avgdl / length, param)  # z


class _Normalized(Similarity):
    """Shared parameter handling of DFR and IB's term-frequency normalisation."""

    def _validate_normalization(self) -> None:
        kind = self._choice("normalization", tuple(NORMALIZATION_PARAMS))
        for other, spec in NORMALIZATION_PARAMS.items():
            if spec and other != kind and self.params.get(spec[0]) != spec[1]:
                raise UserError(
                    f"similarity {self.name!r}: parameter {spec[0]!r} "
                    f"does not apply to normalization {kind!r}"
                )
        spec = NORMALIZATION_PARAMS[kind]
        if spec is None:
            return
        if kind == "z":
            self._number(spec[0], lambda v: 0 < v < 0.5, "in (0, 0.5)")
        else:
            self._number(spec[0], lambda v: v >= 0, "a finite number >= 0")

    def _tfn(self, stats: PostingStats) -> NDArray[np.float64]:
        kind = self.params["normalization"]
        spec = NORMALIZATION_PARAMS[kind]
        return _tfn(kind, self.params[spec[0]] if spec else None, stats)


_NORM_DEFAULTS = {spec[0]: spec[1] for spec in NORMALIZATION_PARAMS.values() if spec}


class DFR(_Normalized):
    """Lucene 8 ``DFRSimilarity``; default configuration G / L / H2 (c = 1).

    Elasticsearch's names: ``basic_model`` g|if|in|ine, ``after_effect`` b|l,
    ``normalization`` no|h1|h2|h3|z with ``normalization.h2.c`` etc. (from Python, replace the
    dots with underscores).
    """

    name = "dfr"
    defaults: ClassVar[dict[str, Any]] = {
        "basic_model": "g",
        "after_effect": "l",
        "normalization": "h2",
        **_NORM_DEFAULTS,
    }

    def _validate(self) -> None:
        self._choice("basic_model", ("g", "if", "in", "ine"))
        self._choice("after_effect", ("b", "l"))
        self._validate_normalization()

    def score(self, stats: PostingStats, boost: float = 1.0) -> NDArray[np.float32]:
        tfn = self._tfn(stats)
        n_docs = float(stats.doc_count)
        ttf = stats.total_term_freq[stats.term].astype(np.float64)
        df = stats.doc_freq[stats.term].astype(np.float64)
        after = (ttf + 1.0 + 1.0) / (df + 1.0) if self.params["after_effect"] == "b" else np.ones_like(tfn)
        model = self.params["basic_model"]
        if model == "g":
            big_f = ttf + 1.0
            lam = big_f / (n_docs + big_f)
            a, b = _log2(lam + 1.0), _log2((1.0 + lam) / lam)
            raw = boost * ((b - (b - a) / (1.0 + tfn)) * after)
        else:
            if model == "in":
                a = _log2((n_docs + 1.0) / (df + 0.5))
            elif model == "if":
                a = _log2(1.0 + (n_docs + 1.0) / (ttf + 0.5))
            else:  # ine
                ne = n_docs * (1.0 - np.power((n_docs - 1.0) / n_docs, ttf))
                a = _log2((n_docs + 1.0) / (ne + 0.5))
            raw = boost * (a * after * (1.0 - 1.0 / (1.0 + tfn)))
        return raw.astype(F32)


class IB(_Normalized):
    """Lucene 8 ``IBSimilarity``; default configuration distribution LL, lambda DF, normalization H2.

    Elasticsearch's names: ``distribution`` ll|spl, ``lambda`` df|ttf, ``normalization`` as DFR.
    """

    name = "ib"
    defaults: ClassVar[dict[str, Any]] = {
        "distribution": "ll",
        "lambda": "df",
        "normalization": "h2",
        **_NORM_DEFAULTS,
    }

    def _validate(self) -> None:
        self._choice("distribution", ("ll", "spl"))
        self._choice("lambda", ("df", "ttf"))
        self._validate_normalization()

    def _lambda(self, stats: PostingStats) -> NDArray[np.float64]:
        if self.params["lambda"] == "df":
            lam = ((stats.doc_freq + 1.0) / (stats.doc_count + 1.0)).astype(F32)
            lam = np.where(lam == F32(1), np.nextafter(F32(1), F32(0)), lam)
        else:
            lam = ((stats.total_term_freq + 1.0) / (stats.doc_count + 1.0)).astype(F32)
            lam = np.where(lam == F32(1), np.nextafter(F32(1), F32(2)), lam)
        return lam.astype(np.float64)[stats.term]

    def score(self, stats: PostingStats, boost: float = 1.0) -> NDArray[np.float32]:
        tfn = self._tfn(stats)
        lam = self._lambda(stats)
        if self.params["distribution"] == "ll":
            return (boost * -np.log(lam / (tfn + lam))).astype(F32)
        exponent = 1.0 - 1.0 / (tfn + 1.0)
        exponent = np.where(exponent == 1.0, np.nextafter(1.0, 0.0), exponent)
        power = np.power(lam, exponent)
        nudged = np.where(lam < 1.0, np.nextafter(lam, np.inf), np.nextafter(lam, -np.inf))
        power = np.where(power == lam, nudged, power)
        return (boost * -np.log((power - lam) / (1.0 - lam))).astype(F32)


SIMILARITY_CLASSES: dict[str, type[Similarity]] = {
    cls.name: cls for cls in (BM25, LMDirichlet, LMJelinekMercer, DFR, IB, TFIDF)
}
SIMILARITIES: tuple[str, ...] = ("bm25", "lmdirichlet", "lmjelinekmercer", "dfr", "ib", "tfidf")


def make_similarity(name: str, **params: Any) -> Similarity:
    """Build a similarity by name with Elasticsearch's parameter names.

    Python-friendly spellings are accepted too: ``lambda_`` for ``lambda``, ``normalization_h2_c``
    for ``normalization.h2.c``. Unknown names and bad values raise UserError naming them.
    """
    cls = SIMILARITY_CLASSES.get(str(name).lower())
    if cls is None:
        raise UserError(f"unknown similarity {name!r} (choose from {', '.join(SIMILARITIES)})")
    canonical = {key.replace(".", "_").rstrip("_"): key for key in cls.defaults}
    renamed: dict[str, Any] = {}
    for key, value in params.items():
        renamed[canonical.get(key.replace(".", "_").rstrip("_"), key)] = value
    return cls(**renamed)
