"""``es setup --shards N --replicas R`` shapes the index body (``elastic/cluster/shards.py``): the default
stays one shard and the cluster's replicas; a layout the engine would refuse is one line before anything is
sent. The cluster tests (``tests/cluster/``) run every mode on such an index."""

from __future__ import annotations

import pytest

from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.cluster.shards import GLOBAL_STATISTICS, ONE_SHARD, IndexLayout, search_type
from es_plugin_bridge.errors import UserError


def test_the_default_index_is_one_shard_with_the_clusters_replicas():
    settings = mappings.index_body(**ONE_SHARD.body_options())["settings"]
    assert settings["number_of_shards"] == 1 and "number_of_replicas" not in settings
    assert mappings.index_body()["settings"] == settings


def test_shards_and_replicas_go_into_the_settings():
    layout = IndexLayout(3, 1)
    settings = mappings.index_body(dimension=24, knn_plugin=True, **layout.body_options())["settings"]
    assert settings["number_of_shards"] == 3 and settings["number_of_replicas"] == 1
    assert settings["index.knn"] is True
    assert layout.describe() == "3 shards, 1 replica"
    assert IndexLayout(1, 0).describe() == "1 shard, 0 replicas"


@pytest.mark.parametrize(("shards", "replicas", "said"), [(0, None, "--shards must be at least 1, got 0"),
                                                          (2, -1, "--replicas must be at least 0, got -1")])
def test_an_impossible_layout_is_one_line(shards, replicas, said):
    with pytest.raises(UserError) as caught:
        IndexLayout(shards, replicas)
    assert str(caught.value) == said


def test_global_statistics_is_the_dfs_search_type():
    assert search_type(True) == {"search_type": GLOBAL_STATISTICS} == {"search_type": "dfs_query_then_fetch"}
    assert search_type(False) == {}


def test_setup_refuses_shards_below_one_in_one_line(cli):
    code, out, err = cli(["es", "setup", "model", "--shards", "0"])
    assert code == 2 and out == ""
    assert "Invalid value for '--shards': 0 is not in the range x>=1." in err
