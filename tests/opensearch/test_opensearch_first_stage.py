"""The first stage on a real engine scores as the embedded engine does in process.

The product's questions index (``elastic.mappings.index_body``: the six similarities, the whitespace
analyzer over the product's own tokens, no vectors) is created on the node as it is, its documents are
``elastic.mappings.document``, and its first-stage query is ``elastic.queries.first_stage_query``:
the same bodies Elasticsearch gets, since OpenSearch and Elasticsearch share them (both fork Lucene's
similarities: ``BM25``, ``LMDirichlet``, ``LMJelinekMercer``, ``DFR``, ``IB``, and the ``scripted``
TF-IDF in Painless). For every similarity, on SemEval-2016 dev (rerank: each query's ten candidates,
a candidate sharing no token scored 0 through the ``ids`` filter) and on AskUbuntu questions with
their HTML bodies, shell and code snippets included (retrieval: the top 10 of the whole collection,
the query excluded): the same documents, with the same scores up to float rounding (Lucene scores
in float; the embedded engine in double).

One rule restated from the engine's source: OpenSearch 2.19's ``BM25`` similarity is Lucene's
``LegacyBM25Similarity`` (``server/src/main/java/org/opensearch/index/similarity/
SimilarityProviders.java``, ``createBM25Similarity``; the class is lucene-misc's
``org.apache.lucene.misc.search.similarity.LegacyBM25Similarity``), which multiplies Lucene's
``BM25Similarity`` by ``k1 + 1`` "for backward compatibility", as Elasticsearch's does
(``engines/similarities.py`` says so). The embedded engine scores Lucene's ``BM25Similarity``: here
its BM25 scores are multiplied by ``k1 + 1`` before they are compared. Every mode fuses the first
stage after min-max normalisation, so the factor changes no ranking.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.queries import first_stage_query
from es_plugin_bridge.engines.embedded import EmbeddedEngine
from es_plugin_bridge.engines.similarities import SIMILARITIES, make_similarity
from es_plugin_bridge.rankers.base import unique_questions
from es_plugin_bridge.text import Preprocessor

pytestmark = pytest.mark.engine

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
ASKUBUNTU_VAL = SAMPLES / "askubuntu-pairs" / "val.tsv"
#: Lucene computes each score in float: 1e-5 relative is a few float ulps, far below any real difference.
REL = 1e-5
N_RETRIEVAL_QUERIES = 40


def engine_scale(similarity: str) -> float:
    """What the engine's score is, times the embedded engine's (``LegacyBM25Similarity``: k1 + 1)."""
    return 1.0 + make_similarity("bm25").params["k1"] if similarity == "bm25" else 1.0


class Collection:
    """One dataset indexed both ways: on the node, and in the embedded engine."""

    def __init__(self, opensearch, name: str, questions, tokens) -> None:
        self.opensearch, self.index, self.tokens = opensearch, name, tokens
        self.questions = {q.id: q for q in questions}
        opensearch.ok("PUT", f"/{name}", mappings.index_body())
        lines = []
        for q in questions:
            lines.append(f'{{"index": {{"_id": {_json(q.id)}}}}}')
            lines.append(_json(mappings.document(q, tokens(q))))
        answer = opensearch.ok("POST", f"/{name}/_bulk?refresh=true", ("\n".join(lines) + "\n").encode())
        assert not answer["errors"], [i for i in answer["items"] if "error" in i["index"]][:1]
        self.embedded = EmbeddedEngine(tokens)
        self.embedded.index(questions)

    def search(self, body: dict, size: int) -> dict[str, float]:
        answer = self.opensearch.ok("POST", f"/{self.index}/_search",
                                    {"query": body, "size": size, "_source": False})
        return {h["_id"]: h["_score"] for h in answer["hits"]["hits"]}


def _json(value) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


@pytest.fixture(scope="module")
def tokens():
    return Preprocessor().tokens


@pytest.fixture(scope="module")
def semeval(opensearch, tokens):
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries
    questions = unique_questions([q.candidates for q in queries])
    collection = Collection(opensearch, "first-stage-semeval", questions, tokens)
    return collection, queries


@pytest.fixture(scope="module")
def askubuntu(opensearch, tokens):
    pairs = read_spec(f"pairs:{ASKUBUNTU_VAL}").pairs
    questions = unique_questions([[p.q1, p.q2] for p in pairs])
    collection = Collection(opensearch, "first-stage-askubuntu", questions, tokens)
    # Queries: the messiest questions of the collection first (a ``${`` variable, a backslash, code).
    messy = sorted(questions, key=lambda q: ("${" not in q.body, "\\" not in q.body, "<code>" not in q.body))
    return collection, messy[:N_RETRIEVAL_QUERIES]


def test_the_askubuntu_queries_hold_shell_and_code(askubuntu):
    """The retrieval queries below are the messy ones: snippets, ``$``-variables and backslashes."""
    _, queries = askubuntu
    bodies = [q.body for q in queries]
    assert sum("<code>" in b for b in bodies) >= 20
    assert any("${" in b for b in bodies) and any("\\" in b for b in bodies)


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_rerank_scores_of_semeval_candidates_equal_the_embedded_engines(semeval, similarity):
    collection, queries = semeval
    first_stage = collection.embedded.first_stage(similarity)
    zero = 0
    for query in queries:
        ids = [c.id for c in query.candidates]
        body = first_stage_query(similarity, collection.tokens(query.query), only=ids)
        remote = collection.search(body, len(set(ids)))
        assert set(remote) == set(ids), query.query.id  # every candidate, shared token or not
        local = first_stage.score(query.query, ids) * engine_scale(similarity)
        np.testing.assert_allclose([remote[i] for i in ids], local, rtol=REL, atol=1e-6,
                                   err_msg=f"{similarity} {query.query.id}")
        zero += int(np.sum(local == 0))
    if similarity == "bm25":
        assert zero > 0  # candidates sharing no token were among them, and came back with 0


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_retrieval_top10_on_askubuntu_equals_the_embedded_engines(askubuntu, similarity):
    collection, queries = askubuntu
    first_stage = collection.embedded.first_stage(similarity)
    for query in queries:
        body = first_stage_query(similarity, collection.tokens(query), exclude={query.id})
        remote = collection.search(body, 10)
        found = first_stage.search(query, 10, exclude={query.id})
        local = {i: s * engine_scale(similarity) for i, s in found}
        assert query.id not in remote
        # Same scores, best first; ids equal except where a tie straddles the 10th place.
        best_first = [sorted(scores.values(), reverse=True) for scores in (remote, local)]
        np.testing.assert_allclose(*best_first, rtol=REL, err_msg=f"{similarity} {query.id}")
        tenth = min(local.values())
        above = {i for i, s in local.items() if s > tenth * (1 + REL)}
        assert above <= set(remote), (similarity, query.id)
        for doc_id in above:
            assert remote[doc_id] == pytest.approx(local[doc_id], rel=REL)
