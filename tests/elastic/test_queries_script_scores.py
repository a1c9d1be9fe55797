"""The query builder's rules that mutation testing found unpinned (``es_plugin_bridge/elastic/queries.py``).

Each test restates the Elasticsearch rule it relies on and where it lives in Elasticsearch's source:

- ``script_score`` refuses a negative score: ``ScriptScoreFunction.score`` throws "script score function
  must not produce negative scores" (``server/src/main/java/org/elasticsearch/common/lucene/search/
  function/ScriptScoreFunction.java``);
- ``cosineSimilarity`` is the cosine of the query and document vectors, in [−1, 1]; ``l1norm`` is
  Σ|q_i − d_i| ≥ 0; both throw "A document doesn't have a value for a vector field!" on a document
  without a vector (``server/src/main/java/org/elasticsearch/script/VectorScoreScriptUtils.java``);
- ``ids`` in ``filter`` keeps only the given documents and ``ids`` in ``must_not`` drops them
  (``IdsQueryBuilder``, ``BoolQueryBuilder``).

The Painless sources the product writes are evaluated here as Python, with those definitions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from painless_as_python import painless_as_python

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic import queries
from es_plugin_bridge.elastic.modes import native as native_mode
from es_plugin_bridge.elastic.modes import vectors as vectors_mode
from es_plugin_bridge.text import Preprocessor

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"


def run_painless(script: Mapping[str, Any], score: float, doc: Sequence[float] | None) -> float:
    """The value of one ``script_score`` script for a document (``doc``: its vector, None when it has
    none) whose inner query scored ``score``: the forms the product writes, evaluated as Python."""
    source, params = script["source"], script["params"]
    expr = painless_as_python(source)
    cos = l1 = math.nan  # no vector: Elasticsearch throws, NaN fails the check below
    if doc is not None and "q" in params:
        q, d = np.asarray(params["q"], dtype=np.float64), np.asarray(doc, dtype=np.float64)
        norms = float(np.linalg.norm(q) * np.linalg.norm(d))
        cos = float(np.dot(q, d)) / norms if norms else math.nan  # Lucene's cosine of a zero vector: NaN
        l1 = float(np.abs(q - d).sum())
    value = eval(expr, {"exp": math.exp, "__builtins__": {}},  # noqa: S307 (the product's own scripts)
                 {"params": params, "_score": score, "NOVEC": doc is None, "COS": cos, "L1": l1})
    assert value >= 0, f"script_score refuses the negative score {value}"
    return float(value)


QUERY = [0.3, -0.2, 0.9, 0.1]
#: (document vector, the neural part's value): the same direction, the opposite, orthogonal, none.
COSINE_DOCS = [(QUERY, 2.0), ([-x for x in QUERY], 0.0), ([0.2, 0.3, 0.0, 0.0], 1.0), (None, 1.0)]
#: exp(−L1): the query itself, then farther and farther documents.
MANHATTAN_DOCS = [(QUERY, 1.0), ([0.3, -0.2, 0.9, 1.1], math.exp(-1.0)), ([30.0, 20.0, -9.0, 4.0], 0.0)]


@pytest.mark.parametrize(("similarity", "docs"), [("cosine", COSINE_DOCS), ("manhattan", MANHATTAN_DOCS)])
def test_the_neural_range_is_what_the_neural_script_can_score(similarity, docs):
    """cosine + 1 spans [0, 2] (reached at the query's direction and its opposite; a document with no
    vector scores cosine 0); exp(−L1) spans (0, 1] (1 at the query itself, → 0 far away)."""
    script = {"source": queries.neural_script(similarity), "params": {"q": QUERY}}
    values = [run_painless(script, 0.0, doc) for doc, _ in docs]
    assert values == pytest.approx([want for _, want in docs], abs=1e-12)
    assert queries.neural_range(similarity) == ({"cosine": (0.0, 2.0), "manhattan": (0.0, 1.0)}[similarity])
    low, high = queries.neural_range(similarity)
    assert low <= min(values) and max(values) == pytest.approx(high)


@pytest.mark.parametrize(("similarity", "b_bow", "b_nn", "shift"), [
    ("cosine", 0.15, 0.5, 0.0), ("cosine", -0.4, 0.5, 0.4), ("cosine", 0.2, -0.7, 1.4),
    ("cosine", -0.4, -0.7, 1.8), ("manhattan", 0.2, -0.7, 0.7), ("manhattan", -0.4, -0.7, 1.1),
    ("manhattan", -0.4, 0.5, 0.4), ("manhattan", 0.15, 0.5, 0.0),
])
def test_the_rest_of_fused_scores_beta_times_its_parts_plus_the_least_shift(similarity, b_bow, b_nn, shift):
    """The script is β_bow·bow + β_nn·neural + shift for every document, where the shift is the least
    constant that keeps every document ≥ 0 (``script_score`` refuses negatives): −β·(bound) for each
    negative β — 1 for the BOW part, 2 for cosine + 1, 1 for exp(−L1)."""
    beta = {"bow": b_bow, "neural": b_nn}
    assert queries.rest_shift(beta, similarity) == pytest.approx(shift, abs=1e-12)
    rest = queries.rest_of_fused(QUERY, {"grub": 0.5}, beta, similarity)["script_score"]
    docs = COSINE_DOCS if similarity == "cosine" else MANHATTAN_DOCS
    values = []
    for bow in (0.0, 0.37, 1.0):
        for doc, neural in docs:
            got = run_painless(rest["script"], bow, doc)
            assert got == pytest.approx(b_bow * bow + b_nn * neural + shift, abs=1e-12)
            values.append(got)
    assert min(values) == pytest.approx(0.0, abs=1e-12) or shift == 0.0


@pytest.mark.parametrize("neural_bounds", [(1.0, 3.0), (-1.0, 1.0), (-2.0, -0.5)])
@pytest.mark.parametrize(("b_bow", "b_nn"), [(0.2, 0.5), (-0.4, 0.5), (0.2, -0.7), (-1.5, -2.0)])
def test_the_shift_holds_for_any_neural_range(monkeypatch, neural_bounds, b_bow, b_nn):
    """``rest_shift`` rests on the neural range only through its bounds: for a range that does not
    start at 0 (a raw cosine in [−1, 1], a score kept above 1) the shift is still the least constant
    that makes every corner of [0, 1] × range non-negative."""
    monkeypatch.setattr(queries, "neural_range", lambda similarity: neural_bounds)
    low, high = neural_bounds
    want = max(0.0, -b_bow) + max(0.0, -min(b_nn * low, b_nn * high))
    shift = queries.rest_shift({"bow": b_bow, "neural": b_nn}, "cosine")
    assert shift == pytest.approx(want, abs=1e-12)
    corners = [b_bow * bow + b_nn * nn + shift for bow in (0.0, 1.0) for nn in neural_bounds]
    assert min(corners) >= -1e-12


def test_a_zero_manhattan_query_vector_keeps_its_l1_script():
    """The zero-vector guard is for cosine (NaN); exp(−L1) of a zero query vector is well defined, so a
    manhattan query with no tokens still scores each document by its distance to the origin."""
    beta = {"bow": 0.2, "neural": 0.5}
    rest = queries.rest_of_fused([0.0, 0.0, 0.0], {}, beta, "manhattan")["script_score"]["script"]
    assert rest["params"]["q"] == [0.0, 0.0, 0.0] and "l1norm(params.q, 'vector')" in rest["source"]
    assert run_painless(rest, 0.0, [0.0, 0.0, 0.0]) == pytest.approx(0.5)
    assert run_painless(rest, 0.0, [1.0, -1.0, 0.0]) == pytest.approx(0.5 * math.exp(-2.0))


def test_the_shift_is_a_named_parameter_added_once():
    """A negative β adds exactly ``+ params.shift`` to the script, the shift of the query's own
    similarity; a non-negative β sends no shift at all."""
    beta = {"bow": 0.2, "neural": -0.7}
    for similarity, shift in (("cosine", 1.4), ("manhattan", 0.7)):
        script = queries.rest_of_fused(QUERY, {}, beta, similarity)["script_score"]["script"]
        neural = queries.neural_script(similarity)
        assert script["source"] == f"params.b_bow * _score + params.b_nn * {neural} + params.shift"
        assert script["params"].pop("q") == QUERY
        assert script["params"] == pytest.approx({"b_bow": 0.2, "b_nn": -0.7, "shift": shift})
    script = queries.rest_of_fused(QUERY, {}, {"bow": 0.2, "neural": 0.7}, "cosine")["script_score"]["script"]
    assert "shift" not in script["params"] and "shift" not in script["source"]


def test_terms_of_zero_weight_send_no_clause():
    """Σ u_t·v_d[t]: a term with u_t = 0 adds nothing, so it is not sent (one clause fewer towards
    ``indices.query.bool.max_clause_count``); a negative weight is sent as its magnitude (Lucene's
    ``BoostQuery`` refuses a negative boost)."""
    body = queries.bow_query({"grub": 0.5, "the": 0.0, "boot": -0.25, "a": -0.0})
    clauses = body["bool"]["should"]
    assert [c["rank_feature"]["field"] for c in clauses] == ["bow.boot", "bow.grub"]
    assert [c["rank_feature"]["boost"] for c in clauses] == [0.25, 0.5]
    assert queries.bow_query({"the": 0.0})["bool"] == {"filter": [{"match_all": {}}]}


def _standard_queries(body: Any) -> list[dict[str, Any]]:
    """Every ``standard`` retriever's query in a retriever tree."""
    found = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key == "standard":
                found.append(value["query"])
            else:
                found.extend(_standard_queries(value))
    elif isinstance(body, list):
        for value in body:
            found.extend(_standard_queries(value))
    return found


def test_both_retrievers_keep_only_the_candidates_and_drop_the_query():
    """A SemEval-2016 dev query reranks its own ten candidates (``only``) and, in retrieval, must not
    find itself (``exclude``): every first stage of the retriever tree carries both, or the linear sum
    would mix scores of documents that the other child never saw."""
    rq = read_spec(f"semeval:{SEMEVAL_DEV}").queries[0]
    tokens = Preprocessor().tokens(rq.query)
    only = [c.id for c in rq.candidates]
    exclude = {rq.query.id}
    want = queries.first_stage_query("bm25", tokens, only=only, exclude=exclude)
    assert want["bool"]["filter"] == [{"ids": {"values": only}}]
    assert want["bool"]["must_not"] == [{"ids": {"values": [rq.query.id]}}]
    native = native_mode.native_retriever(similarity="bm25", tokens=tokens, query_text=rq.query.title,
                                      inference_id="e", beta_first_stage=0.35, window=10, only=only,
                                      exclude=exclude)
    rest = queries.rest_of_fused(QUERY, {"bank": 0.5}, {"bow": 0.15, "neural": 0.5}, "cosine")
    vectors = vectors_mode.vectors_retriever(similarity="bm25", tokens=tokens, rest=rest,
                                             beta_first_stage=0.35,
                                        window=10, only=only, exclude=exclude)
    assert _standard_queries(native) == [want, want]
    assert _standard_queries(vectors) == [want]
