"""OpenSearch's own query tutorials on the product's index: ``neural``, ``neural_sparse`` and ``hybrid``
queries, written as OpenSearch's documentation writes them, with the two ml-commons models that
``es setup --embed-at-ingest`` registers on the sidecar (docs/opensearch.md, "From OpenSearch's own
tutorials").

The rule checked: a query that names a model gets the same hits as the same query given the sidecar's
own answer for the query text (``/v1/encode``'s vector for ``knn``, its terms for ``neural_sparse``'s
``query_tokens``), so the model in the middle changes nothing. neural-search 2.19.1 rules relied on:
``NeuralQueryBuilder`` embeds ``query_text`` with ``model_id`` and rewrites itself to the k-NN
plugin's ``knn`` query on the field (``k`` required); ``NeuralSparseQueryBuilder`` asks the model for
the text's token weights and scores ``Σ weight_q · feature_d`` over the shared tokens, as it does with
``query_tokens`` given; ``HybridQueryBuilder`` runs each sub-query and the search pipeline's
``normalization-processor`` min-max normalises and combines their scores.
"""

from __future__ import annotations

import pytest
from es_commands import TITLES, TOKEN, common, run
from live_sidecar import post

from es_plugin_bridge.data.spec import read_spec

pytestmark = [pytest.mark.engine, pytest.mark.slow]

INDEX = "tutorial-askubuntu"
PIPELINE = "tutorial-hybrid"


@pytest.fixture(scope="module")
def tutorial(opensearch, sidecar, tmp_path_factory):
    """600 lines of AskUbuntu title pairs set up with ``--embed-at-ingest`` and indexed; the ids of the
    vector and terms models (``_meta.esrerank.embedding``) and 12 query titles."""
    url, model = sidecar
    path = tmp_path_factory.mktemp("titles") / "titles.tsv"
    path.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[5000:5600]),
                    encoding="utf-8")
    assert run(["es", "setup", str(model), "--index", INDEX, "--embed-at-ingest", "--recreate",
                *common(opensearch, url)]) == 0
    assert run(["es", "index", f"pairs:{path}", "--index", INDEX, "--no-progress",
                *common(opensearch, url)]) == 0
    meta = opensearch.ok("GET", f"/{INDEX}/_mapping")[INDEX]["mappings"]["_meta"]["esrerank"]["embedding"]
    opensearch.ok("PUT", f"/_search/pipeline/{PIPELINE}", {"phase_results_processors": [{
        "normalization-processor": {"normalization": {"technique": "min_max"},
                                    "combination": {"technique": "arithmetic_mean",
                                                    "parameters": {"weights": [0.3, 0.7]}}}}]})
    queries = [q.title for q in list(read_spec(f"pairs:{path}").questions.values())[:12]]
    return url, meta["vector_model"], meta["bow_model"], queries


def _encoded(url: str, text: str) -> dict:
    status, answer = post(f"{url}/v1/encode", {"texts": [text]}, TOKEN)
    assert status == 200, answer
    return answer["embeddings"][0]


def _hits(opensearch, body: dict, suffix: str = "") -> list[tuple[str, float]]:
    hits = opensearch.ok("POST", f"/{INDEX}/_search{suffix}", {"size": 10, "_source": False, **body})
    return [(h["_id"], h["_score"]) for h in hits["hits"]["hits"]]


def test_a_neural_query_ranks_as_knn_with_the_sidecars_vector(opensearch, tutorial):
    url, vector_model, _, queries = tutorial
    for text in queries:
        neural = _hits(opensearch, {"query": {"neural": {"vector": {
            "query_text": text, "model_id": vector_model, "k": 10}}}})
        knn = _hits(opensearch, {"query": {"knn": {"vector": {
            "vector": _encoded(url, text)["vector"], "k": 10}}}})
        assert neural and [i for i, _ in neural] == [i for i, _ in knn], text
        assert [s for _, s in neural] == pytest.approx([s for _, s in knn], abs=1e-6)


def test_a_neural_sparse_query_ranks_as_the_sidecars_terms(opensearch, tutorial):
    url, _, bow_model, queries = tutorial
    for text in queries:
        encoded = _encoded(url, text)
        tokens = dict(zip(encoded["bow_tokens"], encoded["bow_weights"], strict=True))
        by_model = _hits(opensearch, {"query": {"neural_sparse": {"bow": {
            "query_text": text, "model_id": bow_model}}}})
        by_tokens = _hits(opensearch, {"query": {"neural_sparse": {"bow": {"query_tokens": tokens}}}})
        assert [i for i, _ in by_model] == [i for i, _ in by_tokens], text
        assert [s for _, s in by_model] == pytest.approx([s for _, s in by_tokens], rel=1e-6)
    assert any(_hits(opensearch, {"query": {"neural_sparse": {"bow": {
        "query_text": text, "model_id": bow_model}}}}) for text in queries)


def test_a_hybrid_query_combines_bm25_and_neural_through_a_normalization_pipeline(opensearch, tutorial):
    url, vector_model, _, queries = tutorial
    for text in queries:
        lexical = {"match": {"title": text}}
        neural = {"neural": {"vector": {"query_text": text, "model_id": vector_model, "k": 10}}}
        hybrid = _hits(opensearch, {"query": {"hybrid": {"queries": [lexical, neural]}}},
                       f"?search_pipeline={PIPELINE}")
        either = {i for i, _ in _hits(opensearch, {"query": lexical})} | {
            i for i, _ in _hits(opensearch, {"query": neural})}
        assert hybrid and {i for i, _ in hybrid} <= either, text
        assert all(0.0 <= s <= 1.0 for _, s in hybrid)  # min-max normalised, weights summing to 1
