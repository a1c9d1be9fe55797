"""The vector modes' bodies in OpenSearch's terms (es_plugin_bridge/elastic/cluster/opensearch_dsl.py) and the
OpenSearch questions index (``mappings.index_body(knn_plugin=True)``), checked without a node;
``tests/opensearch/test_opensearch_vectors.py`` runs them on a real one.

What the translation rests on, restated from the source of k-NN 2.19.1 (opensearch-project/k-NN, tag
2.19.1.0): ``src/main/resources/org/opensearch/knn/plugin/script/knn_allowlist.txt`` (the Painless
functions take ``KNNVectorScriptDocValues``, i.e. ``doc[field]``), ``index/query/KNNQueryFactory.java``
(lucene engine: ``luceneK = max(k, ef_search)``, so ``k`` is the HNSW search's size), ``engine/lucene/
Lucene.java`` (spaces: l2, cosinesimil, innerproduct, hamming: no L1).
"""

from __future__ import annotations

import copy
import json

import pytest

from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.elastic import mappings, queries
from es_plugin_bridge.elastic.cluster import opensearch_dsl
from es_plugin_bridge.elastic.modes import hybrid
from es_plugin_bridge.elastic.modes import hybrid as hybrid_mode

TOKENS = ["how", "do", "i", "upgrade", "to", "12.04"]
BETA = {"first_stage": 0.35, "bow": 0.15, "neural": 0.5}
VECTOR = [0.1, -0.2, 0.3]
#: The static imports of k-NN 2.19.1's knn_allowlist.txt, as (return type, name, parameters).
KNN_ALLOWLIST = {
    ("float", "l2Squared", "List, org.opensearch.knn.index.KNNVectorScriptDocValues"),
    ("float", "lInfNorm", "List, org.opensearch.knn.index.KNNVectorScriptDocValues"),
    ("float", "l1Norm", "List, org.opensearch.knn.index.KNNVectorScriptDocValues"),
    ("float", "innerProduct", "List, org.opensearch.knn.index.KNNVectorScriptDocValues"),
    ("float", "cosineSimilarity", "List, org.opensearch.knn.index.KNNVectorScriptDocValues"),
    ("float", "cosineSimilarity", "List, org.opensearch.knn.index.KNNVectorScriptDocValues, Number"),
    ("float", "hamming", "List, org.opensearch.knn.index.KNNVectorScriptDocValues"),
}


def scripts(body) -> list[str]:
    """Every script source of a body."""
    found = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key == "script" and isinstance(value, dict):
                found.append(value["source"])
            else:
                found += scripts(value)
    elif isinstance(body, list):
        for item in body:
            found += scripts(item)
    return found


def test_every_function_the_scripts_call_is_in_the_k_nn_allowlist_with_the_fields_doc_values():
    names = {name for _, name, _ in KNN_ALLOWLIST}
    for ours, theirs in opensearch_dsl.PAINLESS_FUNCTIONS.items():
        assert theirs in names
        assert ours.lower() == theirs.lower()  # the same function, Elasticsearch's spelling
        sent = opensearch_dsl.painless(f"1.0 + {ours}(params.q, '{mappings.VECTOR_FIELD}')")
        assert sent == f"1.0 + {theirs}(params.q, doc['{mappings.VECTOR_FIELD}'])"


@pytest.mark.parametrize("similarity", ["cosine", "manhattan"])
def test_the_vectors_rescore_reads_the_same_with_the_k_nn_functions(similarity):
    rest = queries.rest_of_fused(VECTOR, {"upgrade": 0.5, "12.04": 0.2}, BETA, similarity)
    body = {"query": queries.first_stage_query("bm25", TOKENS), "rescore": queries.rescore(rest, 100, 0.04)}
    before = copy.deepcopy(body)
    sent = opensearch_dsl.translate(body)
    assert body == before  # the Elasticsearch body is not changed in place
    (source,) = scripts(sent)
    if similarity == "cosine":
        assert source == ("params.b_bow * _score + params.b_nn * (doc['vector'].size() == 0 ? 1.0 : "
                          "cosineSimilarity(params.q, doc['vector']) + 1.0)")
    else:
        assert source == "params.b_bow * _score + params.b_nn * Math.exp(-l1Norm(params.q, doc['vector']))"
    # everything but the script is the Elasticsearch body: the rank_feature clauses, params, weights
    (es_source,) = scripts(before)
    swapped = json.dumps(before).replace(json.dumps(es_source)[1:-1], json.dumps(source)[1:-1])
    assert json.dumps(sent) == swapped


def test_a_zero_query_vector_sends_no_vector_function():
    rest = queries.rest_of_fused([0.0, 0.0, 0.0], {"x": 1.0}, BETA, "cosine")
    assert scripts(opensearch_dsl.translate({"query": rest})) == ["params.b_bow * _score + params.b_nn * 1.0"]


def test_the_exact_neighbours_and_the_union_keep_their_shape():
    dense = opensearch_dsl.translate(hybrid_mode.dense_search(VECTOR, 50, "cosine", "exact", exclude={"q"}))
    script = dense["query"]["script_score"]
    assert script["script"]["source"] == \
        "(doc['vector'].size() == 0 ? 1.0 : cosineSimilarity(params.q, doc['vector']) + 1.0)"
    assert script["query"]["bool"]["filter"] == [{"exists": {"field": "vector"}}]
    assert dense["size"] == 50 and dense["_source"] is False
    rest = queries.rest_of_fused(VECTOR, {"upgrade": 0.5}, BETA, "cosine")
    union = opensearch_dsl.translate(hybrid_mode.union_search("bm25", TOKENS, ["a", "b"], rest))
    (clause,) = union["query"]["bool"]["should"]
    assert clause["match"]["text"]["_name"] == queries.FIRST_STAGE_NAME  # its score: matched_queries
    assert union["rescore"]["query"]["query_weight"] == 0.0 and union["size"] == 2


def test_the_knn_section_becomes_the_k_nn_query_with_num_candidates_as_k():
    body = hybrid_mode.dense_search(VECTOR, 50, "cosine", "hnsw", exclude={"q"})
    sent = opensearch_dsl.translate(body)
    assert "knn" not in sent and sent["size"] == 50 and sent["_source"] is False
    assert sent["query"] == {"knn": {"vector": {
        "vector": VECTOR, "k": 500, "filter": {"bool": {"must_not": [{"ids": {"values": ["q"]}}]}}}}}
    plain = opensearch_dsl.translate(hybrid_mode.dense_search(VECTOR, 10, "cosine", "hnsw"))
    assert plain["query"] == {"knn": {"vector": {"vector": VECTOR, "k": 100}}}


def test_what_opensearch_cannot_read_is_refused():
    retriever = hybrid_mode.rrf_retriever(similarity="bm25", tokens=TOKENS, vector=VECTOR,
                                     neural_similarity="cosine", knn="exact", window=10)
    with pytest.raises(ValueError, match="no retrievers"):
        opensearch_dsl.translate({"retriever": retriever})
    builder = queries.knn_search(VECTOR, 10, vector_builder={"text_embedding": {"model_id": "m"}})
    with pytest.raises(ValueError, match="query_vector_builder"):
        opensearch_dsl.translate({"knn": builder})
    with pytest.raises(ValueError, match="both knn and query"):
        opensearch_dsl.translate({"knn": queries.knn_search(VECTOR, 10), "query": {"match_all": {}}})
    with pytest.raises(ValueError, match=r"dotProduct\("):
        opensearch_dsl.painless("dotProduct(params.q, 'vector') + 1.0")


def test_on_opensearch_vectors_takes_two_calls_and_hybrid_rrf_fuses_in_the_client():
    from es_plugin_bridge.elastic.cluster.connection import ClusterInfo
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.elastic.modes.factory import make_mode
    from es_plugin_bridge.elastic.setup import IndexMeta

    cluster = ClusterInfo((2, 19, 1), "apache-2.0", True, "opensearch")
    meta = IndexMeta(model="m", model_type="gru", dimension=3, neural_similarity="cosine",
                     fusion={"bm25": dict(BETA)}, text={})
    stage = ElasticsearchFirstStage(None, "idx", "bm25", lambda q: q.title.split())
    options = {"window": 100, "sidecar": SidecarTarget("http://s:1", None, 1.0), "cluster": cluster}
    assert make_mode("vectors", stage, meta, **options).one_call is False
    assert make_mode("hybrid-rrf", stage, meta, knn="hnsw", **options).in_elasticsearch is False
    assert not hybrid.rrf_in_elasticsearch(cluster)


def test_only_an_opensearch_client_gets_the_translation():
    class OpenSearchLike:
        engine = "opensearch"

    body = {"knn": queries.knn_search(VECTOR, 10), "size": 10}
    assert opensearch_dsl.request_body(OpenSearchLike(), body) == opensearch_dsl.translate(body)
    assert "query" in opensearch_dsl.request_body(OpenSearchLike(), body)
    assert opensearch_dsl.request_body(object(), body) == body  # elasticsearch-py's client has no engine


def test_the_opensearch_index_maps_a_lucene_knn_vector_and_the_rest_as_on_elasticsearch():
    for similarity in ("cosine", "manhattan"):
        es = mappings.index_body(dimension=16, neural_similarity=similarity)
        os_ = mappings.index_body(dimension=16, neural_similarity=similarity, knn_plugin=True)
        vector = os_["mappings"]["properties"].pop("vector")
        es["mappings"]["properties"].pop("vector")
        knn = os_["settings"].pop("index.knn", None)
        assert os_ == es  # similarities, analyzer, text fields, rank_features, one shard
        if similarity == "cosine":
            assert knn is True
            assert vector == {"type": "knn_vector", "dimension": 16,
                              "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}}
        else:  # no L1 space in the lucene engine: the flat field, doc values for the scripts
            assert knn is None and vector == {"type": "knn_vector", "dimension": 16}
    assert mappings.index_body(knn_plugin=True) == mappings.index_body()  # no vectors: the same body
