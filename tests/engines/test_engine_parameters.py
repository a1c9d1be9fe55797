"""Every DFR and IB configuration against its textbook formula (no Lucene needed), and every documented
parameter range of the similarities at both ends, on real AskUbuntu questions.

The ranges are Lucene 8's own checks (read from its bytecode): ``NormalizationH1``/``H2``'s ``c`` and
``H3``'s ``mu`` must be finite and >= 0 — values below 1 are valid and change the scores —,
``NormalizationZ``'s ``z`` lies in (0, 0.5). ``tests/engines/test_lucene_parity.py`` compares with Lucene
itself where its jars are installed; these formulas hold everywhere.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.engines import EmbeddedIndex, make_similarity
from es_plugin_bridge.engines.norms import LENGTH_TABLE, byte4_to_int, int_to_byte4
from es_plugin_bridge.engines.similarities import SIMILARITIES, PostingStats
from es_plugin_bridge.errors import UserError

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", re.sub(r"<[^>]+>", " ", text).lower())


@pytest.fixture(scope="module")
def docs() -> list[list[str]]:
    lines = (SAMPLES / "val.tsv").read_text(encoding="utf-8").splitlines()[:40]
    titles = (SAMPLES / "train_titles.tsv").read_text(encoding="utf-8").splitlines()[:300]
    return [_words(line.split("\t")[1]) for line in lines] + [_words(line.split("\t")[2]) for line in titles]


def _tfn(params: dict, tf: int, dl: float, avgdl: float, p: float) -> float:
    kind = params.get("normalization", "h2")
    if kind == "no":
        return tf
    if kind == "h1":
        return tf * params.get("normalization.h1.c", 1.0) * avgdl / dl
    if kind == "h2":
        return tf * math.log2(1 + params.get("normalization.h2.c", 1.0) * avgdl / dl)
    if kind == "h3":
        mu = params.get("normalization.h3.c", 800.0)
        return (tf + mu * p) / (dl + mu) * mu
    return tf * (avgdl / dl) ** params.get("normalization.z.z", 0.3)


def _reference(name: str, params: dict, docs: list[list[str]], term: str, tf: int, dl: float) -> float:
    n_docs = sum(1 for d in docs if d)
    tokens = sum(len(d) for d in docs)
    df = sum(1 for d in docs if term in d)
    ttf = sum(d.count(term) for d in docs)
    tfn = _tfn(params, tf, dl, tokens / n_docs, (ttf + 1) / (tokens + 1))
    if name == "ib":
        lam = (df + 1) / (n_docs + 1) if params.get("lambda", "df") == "df" else (ttf + 1) / (n_docs + 1)
        if params.get("distribution", "ll") == "ll":
            return math.log((tfn + lam) / lam)
        return -math.log((lam ** (tfn / (tfn + 1)) - lam) / (1 - lam))
    model = params.get("basic_model", "g")
    if model == "g":
        lam = (ttf + 1) / (n_docs + ttf + 1)
        inf1 = math.log2(1 + lam) + tfn * math.log2((1 + lam) / lam)
    elif model == "in":
        inf1 = tfn * math.log2((n_docs + 1) / (df + 0.5))
    elif model == "if":
        inf1 = tfn * math.log2(1 + (n_docs + 1) / (ttf + 0.5))
    else:  # ine: the expected document frequency of ttf occurrences
        ne = n_docs * (1 - ((n_docs - 1) / n_docs) ** ttf)
        inf1 = tfn * math.log2((n_docs + 1) / (ne + 0.5))
    if params.get("after_effect", "l") == "l":
        return inf1 / (tfn + 1)
    return inf1 * (ttf + 2) / ((df + 1) * (tfn + 1))


CONFIGS = [
    *[("dfr", {"basic_model": m, "after_effect": a}) for m in ("g", "if", "in", "ine") for a in ("b", "l")],
    ("dfr", {"basic_model": "in", "normalization": "no"}),
    ("dfr", {"basic_model": "in", "normalization": "h1", "normalization.h1.c": 0.5}),
    ("dfr", {"basic_model": "if", "normalization": "h1", "normalization.h1.c": 3.0}),
    ("dfr", {"basic_model": "in", "normalization": "h2", "normalization.h2.c": 0.25}),
    ("dfr", {"basic_model": "ine", "normalization": "h3", "normalization.h3.c": 0.5}),
    ("dfr", {"basic_model": "in", "normalization": "h3"}),
    ("dfr", {"basic_model": "in", "normalization": "z", "normalization.z.z": 0.1}),
    ("dfr", {"basic_model": "in", "normalization": "z", "normalization.z.z": 0.49}),
    *[("ib", {"distribution": d, "lambda": lam}) for d in ("ll", "spl") for lam in ("df", "ttf")],
    ("ib", {"distribution": "spl", "normalization": "h1", "normalization.h1.c": 0.5}),
    ("ib", {"distribution": "spl", "lambda": "ttf", "normalization": "h2", "normalization.h2.c": 0.5}),
    ("ib", {"distribution": "ll", "normalization": "h3", "normalization.h3.c": 0.75}),
    ("ib", {"distribution": "spl", "normalization": "z", "normalization.z.z": 0.3}),
    ("ib", {"distribution": "ll", "normalization": "no"}),
]


@pytest.mark.parametrize(("name", "params"), CONFIGS, ids=lambda v: v if isinstance(v, str) else
                         "-".join(str(x) for x in v.values()))
def test_every_dfr_and_ib_configuration_follows_its_formula(docs, name, params):
    index = EmbeddedIndex.build(docs, name, **params)
    checked = 0
    for doc_no in random.Random(7).sample(range(len(docs)), 40):
        dl = float(byte4_to_int(int_to_byte4(len(docs[doc_no]))))
        for term, tf in Counter(docs[doc_no]).items():
            expected = _reference(name, params, docs, term, tf, dl)
            (got,) = index.score([term], [str(doc_no)])
            assert got == pytest.approx(expected, rel=1e-5, abs=1e-6), (term, doc_no, got, expected)
            checked += 1
    assert checked > 200


@pytest.mark.parametrize("kind", ["h1", "h2", "h3"])
def test_a_normalization_c_below_one_is_valid_and_changes_the_scores(docs, kind):
    key = f"normalization.{kind}.c"
    base = EmbeddedIndex.build(docs, "dfr", basic_model="in", normalization=kind)
    for c in (0.0, 0.5):
        sim = make_similarity("dfr", basic_model="in", normalization=kind, **{key: c})
        assert sim.params[key] == c
        low = EmbeddedIndex.build(docs, "dfr", basic_model="in", normalization=kind, **{key: c})
        term = Counter(docs[0]).most_common(1)[0][0]
        (a,), (b,) = base.score([term], ["0"]), low.score([term], ["0"])
        assert a != b and (b == 0.0) == (c == 0.0)  # c = 0 makes tfn 0: no information gained


@pytest.mark.parametrize(("name", "params"), [
    ("bm25", {"k1": 0.0}), ("bm25", {"b": 0.0}), ("bm25", {"b": 1.0}), ("bm25", {"k1": 1e6}),
    ("lmdirichlet", {"mu": 1e-6}), ("lmjelinekmercer", {"lambda": 1.0}),
    ("lmjelinekmercer", {"lambda": 1e-6}),
    ("dfr", {"normalization": "h1", "normalization.h1.c": 0.0}),
    ("dfr", {"normalization": "h2", "normalization.h2.c": 0.0}),
    ("dfr", {"normalization": "h3", "normalization.h3.c": 0.0}),
    ("ib", {"normalization": "h2", "normalization.h2.c": 1e-3}),
    ("dfr", {"normalization": "z", "normalization.z.z": 1e-6}),
    ("ib", {"normalization": "z", "normalization.z.z": 0.4999}),
])
def test_parameters_at_the_ends_of_their_ranges_are_accepted(name, params):
    sim = make_similarity(name, **params)
    for key, value in params.items():
        assert sim.params[key] == value


@pytest.mark.parametrize(("name", "params", "named"), [
    ("bm25", {"k1": -1e-9}, "'k1'"), ("bm25", {"b": -1e-9}, "'b'"), ("bm25", {"b": 1.000001}, "'b'"),
    ("bm25", {"k1": float("inf")}, "'k1'"), ("lmdirichlet", {"mu": -1.0}, "'mu'"),
    ("lmjelinekmercer", {"lambda": 1.000001}, "'lambda'"), ("lmjelinekmercer", {"lambda": -0.5}, "'lambda'"),
    ("dfr", {"normalization": "h1", "normalization.h1.c": -1e-9}, "'normalization.h1.c'"),
    ("dfr", {"normalization": "h2", "normalization.h2.c": float("inf")}, "'normalization.h2.c'"),
    ("ib", {"normalization": "h3", "normalization.h3.c": -1.0}, "'normalization.h3.c'"),
    ("ib", {"normalization": "h3", "normalization.h3.c": float("nan")}, "'normalization.h3.c'"),
    ("dfr", {"normalization": "z", "normalization.z.z": 0.0}, "'normalization.z.z'"),
    ("ib", {"normalization": "z", "normalization.z.z": 0.5}, "'normalization.z.z'"),
    ("ib", {"normalization": "h1", "normalization.z.z": 0.2}, "'normalization.z.z'"),
    ("ib", {"normalization": "none"}, "'normalization'"),
    ("dfr", {"normalization": "h2", "normalization.h2.c": "wide"}, "'normalization.h2.c'"),
])
def test_parameters_just_outside_their_ranges_are_refused_by_name(name, params, named):
    with pytest.raises(UserError) as err:
        make_similarity(name, **params)
    assert named in str(err.value)


def test_unknown_parameters_name_the_allowed_ones():
    with pytest.raises(UserError, match=r"unknown parameter 'mu' \(allowed: b, k1\)"):
        make_similarity("bm25", mu=1)
    with pytest.raises(UserError, match=r"unknown parameter 'k1' \(allowed: none\)"):
        make_similarity("tfidf", k1=1)
    with pytest.raises(UserError, match="must be a number, got None"):
        make_similarity("bm25", k1=None)
    with pytest.raises(UserError, match="choose from bm25, lmdirichlet"):
        make_similarity("okapi")


def test_defaults_are_elasticsearchs():
    assert make_similarity("bm25").params == {"k1": 1.2, "b": 0.75}
    assert make_similarity("lmdirichlet").params == {"mu": 2000.0}
    assert make_similarity("lmjelinekmercer").params == {"lambda": 0.1}
    dfr = make_similarity("dfr").params
    assert (dfr["basic_model"], dfr["after_effect"], dfr["normalization"]) == ("g", "l", "h2")
    ib = make_similarity("ib").params
    assert (ib["distribution"], ib["lambda"], ib["normalization"]) == ("ll", "df", "h2")
    assert (ib["normalization.h1.c"], ib["normalization.h2.c"], ib["normalization.h3.c"],
            ib["normalization.z.z"]) == (1.0, 1.0, 800.0, 0.3)
    assert "DFR(basic_model='g'" in repr(make_similarity("dfr"))


@pytest.mark.parametrize(("name", "params", "message"), [
    ("bm25", {"k1": -1}, "similarity 'bm25': parameter 'k1' must be a finite number >= 0, got -1"),
    ("bm25", {"b": 2}, "similarity 'bm25': parameter 'b' must be in [0, 1], got 2"),
    ("lmdirichlet", {"mu": 0}, "similarity 'lmdirichlet': parameter 'mu' must be a finite number > 0, got 0"),
    ("lmjelinekmercer", {"lambda": 0},
     "similarity 'lmjelinekmercer': parameter 'lambda' must be in (0, 1], got 0"),
    ("dfr", {"normalization": "h1", "normalization.h1.c": -1},
     "similarity 'dfr': parameter 'normalization.h1.c' must be a finite number >= 0, got -1"),
    ("ib", {"normalization": "z", "normalization.z.z": 0.5},
     "similarity 'ib': parameter 'normalization.z.z' must be in (0, 0.5), got 0.5"),
    ("dfr", {"after_effect": "x"}, "similarity 'dfr': parameter 'after_effect' must be one of b, l, got 'x'"),
    ("ib", {"normalization": "h2", "normalization.h1.c": 2},
     "similarity 'ib': parameter 'normalization.h1.c' does not apply to normalization 'h2'"),
])
def test_a_refusal_states_the_rule(name, params, message):
    with pytest.raises(UserError) as err:
        make_similarity(name, **params)
    assert str(err.value) == message


def test_repr_lists_every_parameter():
    assert repr(make_similarity("bm25")) == "BM25(k1=1.2, b=0.75)"
    assert repr(make_similarity("lmjelinekmercer", lambda_=0.5)) == "LMJelinekMercer(lambda=0.5)"


def _stats(norms: np.ndarray, freq: float = 1.0) -> PostingStats:
    """One term in ``len(norms)`` documents, one posting each, with the given norm bytes."""
    n = len(norms)
    return PostingStats(freq=np.full(n, freq, dtype=np.float32), norm=norms.astype(np.uint8),
                        term=np.zeros(n, dtype=np.int64), doc_freq=np.array([n]),
                        total_term_freq=np.array([int(n * freq)]), doc_count=n + 10,
                        sum_total_term_freq=int(LENGTH_TABLE[norms].sum()) + 100)


@pytest.mark.parametrize("name", SIMILARITIES)
def test_every_similarity_scores_in_float32_like_lucene(name):
    scores = make_similarity(name).score(_stats(np.arange(1, 256)), boost=2.0)
    assert scores.dtype == np.float32 and scores.shape == (255,) and np.isfinite(scores).all()


def test_tfidf_length_norm_is_lucenes_for_every_norm_byte_and_the_empty_one():
    norms = np.arange(0, 256)
    scores = make_similarity("tfidf").score(_stats(norms, freq=4.0))
    stats = _stats(norms, freq=4.0)
    idf = np.float32(np.log((stats.doc_count + 1.0) / (stats.doc_freq[0] + 1.0)) + 1.0)
    norm = (1.0 / np.sqrt(LENGTH_TABLE[1:].astype(np.float64))).astype(np.float32)  # (float) (1/Math.sqrt)
    np.testing.assert_array_equal(scores[1:], (np.float32(2.0) * idf) * norm)
    # Byte 0 (no length) is Lucene's 1 / norm(255), not infinity.
    assert scores[0] == (np.float32(2.0) * idf) * (np.float32(1) / norm[-1])


def test_tfidf_on_a_one_word_document(docs):
    one = [["wifi"], ["wifi", "drops"], *docs]
    index = EmbeddedIndex.build(one, "tfidf")
    n = sum(1 for d in one if d)
    df = sum(1 for d in one if "wifi" in d)
    (got,) = index.score(["wifi"], ["0"])
    assert got == pytest.approx(1 + math.log((n + 1) / (df + 1)), rel=1e-6)  # sqrt(1) * idf / sqrt(1)


@pytest.mark.parametrize("lam_kind", ["df", "ttf"])
@pytest.mark.parametrize("distribution", ["ll", "spl"])
def test_ib_at_lambda_one_uses_lucenes_nudged_lambda(docs, lam_kind, distribution):
    """A word once in every document makes λ = (df + 1)/(N + 1) = (ttf + 1)/(N + 1) exactly 1, where SPL
    would divide by zero: Lucene moves λ to the next float below 1 (df) or above 1 (ttf)."""
    every = [[*d, "zzqxeverywhere"] for d in docs if d]
    sim = {"distribution": distribution, "lambda": lam_kind, "normalization": "no"}
    index = EmbeddedIndex.build(every, "ib", **sim)
    lam = float(np.nextafter(np.float32(1), np.float32(0 if lam_kind == "df" else 2)))
    for doc_no in (0, 5, len(every) - 1):
        (got,) = index.score(["zzqxeverywhere"], [str(doc_no)])
        tfn = 1.0
        expected = (math.log((tfn + lam) / lam) if distribution == "ll"
                    else -math.log((lam ** (tfn / (tfn + 1)) - lam) / (1 - lam)))
        assert np.isfinite(got) and got == pytest.approx(expected, rel=1e-6), (got, expected)
