"""The three-node cluster itself (``make opensearch NODES=3``, ``opensearch_node/cluster.py``): three
cluster-manager-eligible data nodes on 127.0.0.1 that form one green cluster. What the engine keeps when
one of them dies (``engine_failover``) is checked by ``test_cluster_node_loss`` during its own kills, so
that a node is killed and restarted twice in ``make test``, not four times."""

from __future__ import annotations

import pytest
from engine_failover import manager

from es_plugin_bridge.opensearch_node import cluster as cluster_nodes

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.slow]


def test_three_eligible_data_nodes_form_one_green_cluster(opensearch_cluster):
    health = opensearch_cluster.nodes[0].ok("GET", "/_cluster/health?wait_for_status=green&timeout=60s")
    assert health["number_of_nodes"] == 3 and health["number_of_data_nodes"] == 3
    assert health["cluster_name"] == cluster_nodes.CLUSTER_NAME
    nodes = opensearch_cluster.nodes[0].ok("GET", "/_nodes")["nodes"].values()
    assert all({"cluster_manager", "data"} <= set(n["roles"]) for n in nodes)
    assert {manager(n) for n in opensearch_cluster.nodes} == {manager(opensearch_cluster.nodes[0])}
