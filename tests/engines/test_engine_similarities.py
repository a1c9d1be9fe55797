"""Each similarity against its textbook formula on real AskUbuntu questions, and parameter checks.

The references are written the way the papers (and Lucene's javadoc) state them, in float64 with
Python's math module; the engine's float32 Lucene-order arithmetic must agree to float32 precision.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from es_plugin_bridge.engines import EmbeddedIndex, make_similarity
from es_plugin_bridge.engines.norms import byte4_to_int, int_to_byte4
from es_plugin_bridge.errors import UserError

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", re.sub(r"<[^>]+>", " ", text).lower())


@pytest.fixture(scope="module")
def docs() -> list[list[str]]:
    lines = (SAMPLES / "val.tsv").read_text(encoding="utf-8").splitlines()[:60]
    long_docs = [_words(line.split("\t")[1]) for line in lines]  # title + whole body
    titles = (SAMPLES / "train_titles.tsv").read_text(encoding="utf-8").splitlines()[:400]
    return long_docs + [_words(line.split("\t")[2]) for line in titles]


class Stats:
    """Collection statistics computed directly from the token lists."""

    def __init__(self, docs: list[list[str]]) -> None:
        self.n_docs = sum(1 for d in docs if d)
        self.tokens = sum(len(d) for d in docs)
        self.avgdl = self.tokens / self.n_docs
        self.df = Counter(t for d in docs for t in set(d))
        self.ttf = Counter(t for d in docs for t in d)

    def p(self, term: str) -> float:
        return (self.ttf[term] + 1) / (self.tokens + 1)


def _reference(name: str, s: Stats, term: str, f: int, dl: float, params: dict) -> float:
    n, big_n = s.df[term], s.n_docs
    if name == "bm25":
        k1, b = params.get("k1", 1.2), params.get("b", 0.75)
        idf = math.log(1 + (big_n - n + 0.5) / (n + 0.5))
        return idf * f / (f + k1 * (1 - b + b * dl / s.avgdl))
    if name == "lmdirichlet":
        mu = params.get("mu", 2000)
        return max(0.0, math.log(1 + f / (mu * s.p(term))) + math.log(mu / (dl + mu)))
    if name == "lmjelinekmercer":
        lam = params.get("lambda", 0.1)
        return math.log(1 + ((1 - lam) * f / dl) / (lam * s.p(term)))
    tfn = f * math.log2(1 + s.avgdl / dl)  # normalisation H2, c = 1
    if name == "dfr":  # basic model G, after effect L
        lam = (s.ttf[term] + 1) / (big_n + s.ttf[term] + 1)
        return (math.log2(1 + lam) + tfn * math.log2((1 + lam) / lam)) / (1 + tfn)
    if name == "ib":  # distribution LL, lambda DF
        lam = (n + 1) / (big_n + 1)
        return math.log((tfn + lam) / lam)
    assert name == "tfidf"
    return math.sqrt(f) * (1 + math.log((big_n + 1) / (n + 1))) / math.sqrt(dl)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("bm25", {}),
        ("bm25", {"k1": 2.0, "b": 0.3}),
        ("lmdirichlet", {}),
        ("lmdirichlet", {"mu": 50}),
        ("lmjelinekmercer", {}),
        ("lmjelinekmercer", {"lambda": 0.7}),
        ("dfr", {}),
        ("ib", {}),
        ("tfidf", {}),
    ],
)
def test_scores_follow_the_formula(docs: list[list[str]], name: str, params: dict) -> None:
    stats = Stats(docs)
    index = EmbeddedIndex.build(docs, name, **params)
    rng = random.Random(3)
    checked = clamped = 0
    for doc_no in rng.sample(range(len(docs)), 120):
        doc = docs[doc_no]
        dl = float(byte4_to_int(int_to_byte4(len(doc))))
        for term, f in Counter(doc).items():
            expected = _reference(name, stats, term, f, dl, params)
            (got,) = index.score([term], [str(doc_no)])
            assert got == pytest.approx(expected, rel=2e-6, abs=1e-7), (term, doc_no)
            checked += 1
            clamped += expected == 0.0
    assert checked > 1000
    if name == "lmdirichlet" and not params:
        assert clamped > 0  # long bodies with common words hit Lucene's clamp at 0


def test_lossy_length_changes_long_document_scores(docs: list[list[str]]) -> None:
    stats = Stats(docs)
    index = EmbeddedIndex.build(docs, "bm25")
    long_no = next(
        i for i, d in enumerate(docs) if len(d) > 100 and byte4_to_int(int_to_byte4(len(d))) != len(d)
    )
    term, f = Counter(docs[long_no]).most_common(1)[0]
    (got,) = index.score([term], [str(long_no)])
    exact = _reference("bm25", stats, term, f, float(len(docs[long_no])), {})
    lossy = _reference("bm25", stats, term, f, float(byte4_to_int(int_to_byte4(len(docs[long_no])))), {})
    assert got == pytest.approx(lossy, rel=2e-6)
    assert got != pytest.approx(exact, rel=1e-4)


@pytest.mark.parametrize(
    ("name", "params", "named"),
    [
        ("bm25", {"b": 1.5}, "'b'"),
        ("bm25", {"k1": -1}, "'k1'"),
        ("bm25", {"k1": "lots"}, "'k1'"),
        ("bm25", {"mu": 100}, "'mu'"),
        ("lmdirichlet", {"mu": 0}, "'mu'"),
        ("lmdirichlet", {"mu": float("nan")}, "'mu'"),
        ("lmjelinekmercer", {"lambda": 0}, "'lambda'"),
        ("lmjelinekmercer", {"lambda_": 1.5}, "'lambda'"),
        ("dfr", {"basic_model": "be"}, "'basic_model'"),
        ("dfr", {"after_effect": "no"}, "'after_effect'"),
        ("dfr", {"normalization": "z", "normalization.z.z": 0.7}, "'normalization.z.z'"),
        ("dfr", {"normalization": "h2", "normalization_h3_c": 100}, "'normalization.h3.c'"),
        ("ib", {"distribution": "gauss"}, "'distribution'"),
        ("ib", {"lambda": "tf"}, "'lambda'"),
        ("tfidf", {"k1": 1.0}, "'k1'"),
        ("bm42", {}, "'bm42'"),
    ],
)
def test_bad_similarity_or_parameter_is_a_user_error(name: str, params: dict, named: str) -> None:
    with pytest.raises(UserError) as err:
        make_similarity(name, **params)
    assert named in str(err.value)


def test_python_spellings_and_case_are_accepted() -> None:
    assert make_similarity("LMJelinekMercer", lambda_=0.7).params == {"lambda": 0.7}
    dfr = make_similarity("dfr", basic_model="IN", normalization="h1", normalization_h1_c=2)
    assert (dfr.params["basic_model"], dfr.params["normalization.h1.c"]) == ("in", 2.0)
    assert make_similarity("bm25", k1="0.9").params == {"k1": 0.9, "b": 0.75}
