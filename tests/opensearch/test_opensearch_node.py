"""The node the engine tests run on is a whole OpenSearch: the server, the five modules the product
uses and the four plugins, all at the server's own version (OpenSearch's ``PluginsService`` refuses a
bundle built for another), each doing its job on a real request.

The k-NN zip on Maven Central carries no JNI libraries (only the distribution's does): the ``lucene``
engine answers. ``faiss`` and ``nmslib`` are not tried here: their index is created, and the first
flush of a vector throws ``UnsatisfiedLinkError`` in a write thread, which the launcher, as
OpenSearch's own bootstrap does, treats as fatal (docs/opensearch-node.md).
"""

from __future__ import annotations

import pytest

from es_plugin_bridge.opensearch_node.layout import MODULES, PLUGIN_VERSION, SERVER_VERSION

pytestmark = pytest.mark.engine

#: Plugin names as the nodes API reports them (each zip's ``plugin-descriptor.properties``).
PLUGINS = {"opensearch-job-scheduler", "opensearch-knn", "opensearch-ml", "opensearch-neural-search"}


def test_the_server_and_every_plugin_share_one_version(opensearch):
    assert opensearch.ok("GET", "/")["version"]["number"] == SERVER_VERSION
    info = next(iter(opensearch.ok("GET", "/_nodes/plugins")["nodes"].values()))
    assert {p["name"]: p["version"] for p in info["plugins"]} == dict.fromkeys(PLUGINS, PLUGIN_VERSION)
    modules = {m["name"]: m for m in info["modules"]}
    assert {m.name for m in MODULES} <= set(modules)
    assert {modules[m.name]["opensearch_version"] for m in MODULES} == {SERVER_VERSION}


def test_painless_runs_scripts(opensearch):
    answer = opensearch.ok("POST", "/_scripts/painless/_execute",
                           {"script": {"source": "params.a * 2 + 2", "params": {"a": 20}}})
    assert answer["result"] == "42"


def test_knn_lucene_engine_finds_the_nearest_vectors(opensearch):
    opensearch.ok("PUT", "/knn-lucene", {
        "settings": {"index.knn": True, "number_of_shards": 1},
        "mappings": {"properties": {"v": {"type": "knn_vector", "dimension": 3, "space_type": "cosinesimil",
                                          "method": {"name": "hnsw", "engine": "lucene"}}}}})
    docs = {"a": [1.0, 0.0, 0.0], "b": [0.0, 1.0, 0.0], "c": [0.7, 0.7, 0.0]}
    lines = "".join(f'{{"index": {{"_id": "{i}"}}}}\n{{"v": {v}}}\n' for i, v in docs.items())
    assert not opensearch.ok("POST", "/knn-lucene/_bulk?refresh=true", lines.encode())["errors"]
    hits = opensearch.ok("POST", "/knn-lucene/_search",
                         {"query": {"knn": {"v": {"vector": [0.9, 0.1, 0.0], "k": 2}}}})["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["a", "c"]


def test_mapper_extras_rank_features_score_linearly(opensearch):
    opensearch.ok("PUT", "/features", {"settings": {"number_of_shards": 1},
                                       "mappings": {"properties": {"bow": {"type": "rank_features"}}}})
    lines = ('{"index": {"_id": "x"}}\n{"bow": {"grub": 2.0, "boot": 1.0}}\n'
             '{"index": {"_id": "y"}}\n{"bow": {"grub": 0.5}}\n')
    assert not opensearch.ok("POST", "/features/_bulk?refresh=true", lines.encode())["errors"]
    hits = opensearch.ok("POST", "/features/_search", {"query": {"rank_feature": {
        "field": "bow.grub", "linear": {}}}})["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["x", "y"]
    # rank_features keeps 9 significant bits (Lucene's FeatureField): 2.0 and 0.5 are exact.
    assert [h["_score"] for h in hits] == [2.0, 0.5]


def test_reindex_copies_an_index(opensearch):
    opensearch.ok("PUT", "/reindex-from", {"settings": {"number_of_shards": 1}})
    opensearch.ok("POST", "/reindex-from/_doc/1?refresh=true", {"title": "grub rescue prompt"})
    opensearch.ok("PUT", "/reindex-to", {"settings": {"number_of_shards": 1}})
    answer = opensearch.ok("POST", "/_reindex?refresh=true",
                           {"source": {"index": "reindex-from"}, "dest": {"index": "reindex-to"}})
    assert answer["created"] == 1
    assert opensearch.ok("GET", "/reindex-to/_doc/1")["_source"] == {"title": "grub rescue prompt"}
