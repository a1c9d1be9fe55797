"""The learned hybrid's fit (``training/hybrid_fit.py``): the grid, the cross-validation and the guard that
never keeps a fusion losing to its own best clause on held-out folds; then on real AskUbuntu data."""

from __future__ import annotations

import numpy as np
import pytest
from readers_fixtures import TRAIN_TITLES

from es_plugin_bridge.core.hybrid_fusion import fuse_lists
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.engines import EmbeddedIndex
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.hybrid_fit import CUTOFF, DevQuery, fit_hybrid, per_query_table


def _a(i: int) -> DevQuery:
    """The vectors put a near-miss X above the duplicate R; BM25 has R first: fusing helps."""
    return DevQuery({"dense": [(f"X{i}", 0.9), (f"R{i}", 0.8), (f"Z{i}", 0.1)],
                     "first_stage": [(f"R{i}", 10.0), (f"Z{i}", 5.0), (f"X{i}", 1.0)]}, frozenset({f"R{i}"}))


def _b(i: int) -> DevQuery:
    """The vectors have R first by a hair; BM25 ranks two others above it: fusing hurts."""
    return DevQuery({"dense": [(f"R{i}", 0.9), (f"X{i}", 0.899), (f"Y{i}", 0.898), (f"Z{i}", 0.1)],
                     "first_stage": [(f"X{i}", 10.0), (f"Y{i}", 9.9), (f"Z{i}", 5.0), (f"R{i}", 1.0)]},
                    frozenset({f"R{i}"}))


def test_the_guard_keeps_dense_alone_where_the_naive_fit_overfits():
    """7 queries a fusion helps (+0.5 each) and 5 it hurts (−0.67 each): on all 12 at once the grid's best
    is a fusion (first stage 0.6) that beats dense alone in sample, but every held-out query (leave one
    out) is scored by a fusion fitted without it, and there the fusion loses: the guard keeps dense alone."""
    queries = [_a(i) for i in range(7)] + [_b(i) for i in range(5)]
    table, configs = per_query_table(queries)
    naive = int(np.argmax(table.mean(axis=0)))
    dense = np.mean([1 / 2] * 7 + [1.0] * 5)
    assert 0 < configs[naive].weights["first_stage"] < 1 and table[:, naive].mean() > dense
    fusion, report = fit_hybrid(queries, folds=len(queries))
    assert report["held_out"]["fusion"] < report["held_out"]["dense alone"] == round(100 * dense, 2)
    assert fusion.weights == {"first_stage": 0.0, "dense": 1.0} and report["chosen"].startswith("guard")


def test_a_fusion_that_wins_on_held_out_folds_is_kept():
    """With 8 helped and 5 hurt queries, each held-out query's fit is the fusion and it wins there too."""
    queries = [_a(i) for i in range(8)] + [_b(i) for i in range(5)]
    fusion, report = fit_hybrid(queries, folds=len(queries))
    assert report["held_out"]["fusion"] > max(report["held_out"]["dense alone"],
                                              report["held_out"]["first_stage alone"])
    assert 0 < fusion.weights["first_stage"] < 1 and report["chosen"].startswith("fusion")


def test_the_table_is_what_the_engine_rule_ranks():
    """Each configuration's reciprocal rank (float64 in the fit) is the one :func:`fuse_lists` (the
    engine's float32 rule) gives, on real AskUbuntu titles with shell snippets: BM25 and a second clause
    scored by word overlap with the query's title, 30 queries."""
    ds = read_spec(f"pairs:{TRAIN_TITLES}")
    questions = list(ds.questions.values())[:3000]
    ids = [q.id for q in questions]
    pre = Preprocessor(TextOptions())
    tokens = [pre.tokens(q) for q in questions]
    index = EmbeddedIndex.build(tokens, "bm25", ids=ids)
    sets = [set(t) for t in tokens]
    queries = []
    for qi in range(0, 300, 10):
        query = set(tokens[qi])
        overlap = np.array([len(query & s) / (1 + len(s)) for s in sets])
        overlap[qi] = -1
        dense = [(ids[i], float(overlap[i])) for i in np.argsort(-overlap, kind="stable")[:100]]
        lexical = index.search(tokens[qi], k=100, exclude={ids[qi]})
        queries.append(DevQuery({"first_stage": lexical, "dense": dense}, frozenset({dense[3][0]})))
    table, configs = per_query_table(queries)
    for col in range(0, len(configs), 7):
        fusion = configs[col]
        for qi, query in enumerate(queries):
            lists = {c: list(hits)[: fusion.window] for c, hits in query.lists.items()}
            hits = [doc for doc, _ in fuse_lists(lists, fusion, CUTOFF)]
            (relevant,) = query.relevant
            want = 1 / (hits.index(relevant) + 1) if relevant in hits else 0.0
            assert table[qi, col] == pytest.approx(want), (fusion.describe(), qi)
