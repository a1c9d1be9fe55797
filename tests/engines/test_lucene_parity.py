"""The embedded engine against real Lucene 8 (Debian's liblucene8-java, through jpype).

Both engines index the same tokens of ~3,000 real AskUbuntu questions (full HTML bodies, so many
documents are long and their lengths are stored lossily) and run ~190 real queries; for every
similarity the top-10 must come in the same order (swaps allowed only between exactly tied
scores) with scores within 1e-3 relative.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.engines import SIMILARITIES, EmbeddedIndex
from es_plugin_bridge.engines.lucene import unavailable_reason
from es_plugin_bridge.engines.norms import byte4_to_int, int_to_byte4

pytestmark = pytest.mark.lucene

_REASON = unavailable_reason()
if _REASON:
    pytest.skip(f"real Lucene unavailable: {_REASON}", allow_module_level=True)

from es_plugin_bridge.engines.lucene import LuceneIndex, start_jvm  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs"
K = 10
REL_TOL = 1e-3
# Non-default configurations, on top of each similarity's defaults.
VARIANTS = [
    ("bm25", {"k1": 0.9, "b": 0.4}),
    ("lmdirichlet", {"mu": 100}),
    ("lmjelinekmercer", {"lambda": 0.7}),
    ("dfr", {"basic_model": "in", "after_effect": "b", "normalization": "h1"}),
    ("dfr", {"basic_model": "ine", "after_effect": "l", "normalization": "z"}),
    ("dfr", {"basic_model": "if", "after_effect": "b", "normalization": "h3", "normalization.h3.c": 400}),
    ("ib", {"distribution": "spl", "lambda": "ttf", "normalization": "h2", "normalization.h2.c": 3}),
    ("ib", {"distribution": "ll", "lambda": "df", "normalization": "no"}),
]


def _tokenizer():
    """The product's preprocessing when it is importable, else lowercase word characters."""
    try:
        from es_plugin_bridge.data.types import Question
        from es_plugin_bridge.text import Preprocessor, TextOptions

        pre = Preprocessor(TextOptions(body_words=None))
        return lambda title, body: pre.tokens(Question("q", title, body))
    except ImportError:
        return lambda title, body: re.findall(r"\w+", f"{title} {re.sub(r'<[^>]+>', ' ', body)}".lower())


def _split(cell: str) -> tuple[str, str]:
    cut = cell.find("<")
    return (cell, "") if cut < 0 else (cell[:cut], cell[cut:])


@pytest.fixture(scope="session")
def lucene_jvm() -> None:
    start_jvm()  # jpype can start one JVM per process: once for the whole session


@pytest.fixture(scope="module")
def corpus() -> tuple[list[list[str]], list[list[str]]]:
    tokens = _tokenizer()
    val = [line.rstrip("\n").split("\t") for line in (SAMPLES / "val.tsv").open(encoding="utf-8")]
    seen: set[str] = set()
    docs: list[list[str]] = []
    for _, q1, q2 in val:
        for cell in (q1, q2):
            if cell not in seen:
                seen.add(cell)
                docs.append(tokens(*_split(cell)))
    train = [line.rstrip("\n").split("\t") for line in (SAMPLES / "train_titles.tsv").open(encoding="utf-8")]
    titles = sorted({row[2] for row in train[:1500]})
    docs += [tokens(title, "") for title in titles]
    docs.insert(len(docs) // 2, [])  # a question with no token: stored, but not counted by Lucene
    queries = [tokens(row[1], "") for row in train[2000:2150]]
    queries += [tokens(*_split(q1))[:100] for _, q1, _ in random.Random(7).sample(val, 40)]
    return docs, [q for q in queries if q]


@pytest.fixture(scope="module")
def indexes(lucene_jvm, corpus) -> tuple[EmbeddedIndex, LuceneIndex]:
    docs, _ = corpus
    lucene = LuceneIndex(docs, "bm25")
    yield EmbeddedIndex.build(docs, "bm25"), lucene
    lucene.close()


def test_corpus_is_big_and_long_enough(corpus) -> None:
    docs, queries = corpus
    lengths = np.array([len(d) for d in docs])
    assert len(docs) >= 1000 and len(queries) >= 100
    assert (lengths >= 24).sum() > 500  # lengths from 24 tokens up are stored lossily
    assert lengths.max() > 1000


def test_small_float_matches_lucene(lucene_jvm) -> None:
    import jpype

    small_float = jpype.JClass("org.apache.lucene.util.SmallFloat")
    rng = np.random.default_rng(0)
    lengths = np.concatenate([np.arange(3000), rng.integers(3000, 2**31 - 1, 2000), [2**31 - 1]])
    ours = int_to_byte4(lengths)
    theirs = [int(small_float.intToByte4(int(n))) & 0xFF for n in lengths]
    assert ours.tolist() == theirs
    decoded = [int(small_float.byte4ToInt(jpype.JByte(b - 256 if b > 127 else b))) for b in range(256)]
    assert byte4_to_int(np.arange(256)).tolist() == decoded


def test_norms_and_collection_statistics_match(indexes, corpus) -> None:
    engine, lucene = indexes
    assert engine.postings.norms.tolist() == lucene.norms()
    stats = engine.postings.stats()
    assert (stats.doc_count, stats.sum_total_term_freq) == lucene.collection_stats()
    assert stats.doc_count == len(corpus[0]) - 1


def _assert_same_top(
    query: list[str], ours: list[tuple[str, float]], theirs: list[tuple[int, float]]
) -> None:
    assert len(ours) == len(theirs), query
    our_docs = [int(d) for d, _ in ours]
    our_scores = np.array([s for _, s in ours])
    their_scores = np.array([s for _, s in theirs])
    np.testing.assert_allclose(our_scores, their_scores, rtol=REL_TOL, err_msg=str(query))
    for score in set(their_scores.tolist()):  # docs may differ only inside a group of tied scores
        group = np.flatnonzero(their_scores == score)
        if len(group) > 1 or our_docs[group[0]] != theirs[group[0]][0]:
            assert len(group) > 1, f"{query}: rank {group[0]} differs without a tie"
            if group[-1] < len(theirs) - 1:  # a tie cut by k may legitimately keep other docs
                assert {our_docs[i] for i in group} == {theirs[i][0] for i in group}, query


def _compare(indexes, queries: list[list[str]], similarity: str, params: dict) -> None:
    engine, lucene = indexes
    engine, lucene = (
        engine.with_similarity(similarity, **params),
        lucene.with_similarity(similarity, **params),
    )
    for query in queries:
        _assert_same_top(query, engine.search(query, K), lucene.search(query, K))


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_top10_matches_lucene(indexes, corpus, similarity: str) -> None:
    _compare(indexes, corpus[1], similarity, {})


@pytest.mark.parametrize(
    ("similarity", "params"),
    VARIANTS,
    ids=[f"{n}:" + ",".join(f"{k}={v}" for k, v in p.items()) for n, p in VARIANTS],
)
def test_other_configurations_match_lucene(indexes, corpus, similarity: str, params: dict) -> None:
    _compare(indexes, corpus[1][::4], similarity, params)  # every 4th query keeps the suite quick
