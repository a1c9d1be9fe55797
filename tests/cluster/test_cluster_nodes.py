"""The three-node cluster itself (``make opensearch NODES=3``, ``opensearch_node/cluster.py``): three
cluster-manager-eligible data nodes on 127.0.0.1 that form one green cluster, and an index of 3 shards
with 1 replica that loses nothing and keeps answering when any one node dies — a data node or the
elected cluster manager — and that is whole and green again once the node restarts and rejoins.

OpenSearch's rules this rests on (restated): a replica is never allocated on the node of its primary
(``SameShardAllocationDecider``), so with one replica every shard has a copy on another node; when a
node leaves, the cluster manager promotes the surviving replica of each primary it held
(``AllocationService.disassociateDeadNodes``); a search needs one active copy of every shard and uses
the copies left (``AbstractSearchAsyncAction`` moves to the next copy of a shard on a failure). With
three eligible nodes, two are a voting quorum, so a new cluster manager is elected when the elected one
dies (``Coordinator``).
"""

from __future__ import annotations

import json

import pytest
from es_commands import TITLES

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.opensearch_node import cluster as cluster_nodes

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.slow]

INDEX = "cluster-askubuntu"
WRITES = "cluster-writes"  # written to while a node is down (the questions' statistics stay as they were)
QUESTIONS = 2000


@pytest.fixture(scope="module")
def askubuntu_index(opensearch_cluster):
    """2,000 real AskUbuntu titles in an index of 3 shards, 1 replica (every shard on two nodes)."""
    first = opensearch_cluster.nodes[0]
    questions = list(read_spec(f"pairs:{TITLES}").questions.values())[:QUESTIONS]
    for name in (INDEX, WRITES):
        first.ok("PUT", f"/{name}", {"settings": {"number_of_shards": 3, "number_of_replicas": 1}})
    lines = []
    for q in questions:
        lines += [json.dumps({"index": {"_id": q.id}}), json.dumps({"title": q.title, "body": q.body})]
    answer = first.ok("POST", f"/{INDEX}/_bulk?refresh=true", ("\n".join(lines) + "\n").encode())
    assert not answer["errors"]
    first.ok("GET", "/_cluster/health?wait_for_status=green&timeout=120s")
    return questions


def _top10(node, title: str) -> list[str]:
    body = {"size": 10, "query": {"match": {"title": title}}}
    hits = node.ok("POST", f"/{INDEX}/_search?search_type=dfs_query_then_fetch", body)["hits"]["hits"]
    return [h["_id"] for h in hits]


def _manager(node) -> str:
    status, answer = node.call("GET", "/_cluster/state/cluster_manager_node,nodes")
    assert status == 200, answer
    return answer["nodes"][answer["cluster_manager_node"]]["name"]


def _kill(opensearch_cluster, name: str) -> int:
    index = int(name.rsplit("-", 1)[1])
    cluster_nodes.kill_node(opensearch_cluster.root, index)
    return index


def test_three_eligible_data_nodes_form_one_green_cluster(opensearch_cluster):
    health = opensearch_cluster.nodes[0].ok("GET", "/_cluster/health?wait_for_status=green&timeout=60s")
    assert health["number_of_nodes"] == 3 and health["number_of_data_nodes"] == 3
    assert health["cluster_name"] == cluster_nodes.CLUSTER_NAME
    nodes = opensearch_cluster.nodes[0].ok("GET", "/_nodes")["nodes"].values()
    assert all({"cluster_manager", "data"} <= set(n["roles"]) for n in nodes)
    assert {_manager(n) for n in opensearch_cluster.nodes} == {_manager(opensearch_cluster.nodes[0])}


@pytest.mark.parametrize("which", ["data node", "elected cluster manager"])
def test_a_node_killed_loses_no_question_and_every_search_still_answers(opensearch_cluster, askubuntu_index,
                                                                        which):
    nodes = opensearch_cluster.nodes
    manager = _manager(nodes[0])
    victim = manager if which == "elected cluster manager" else next(
        f"esrerank-node-{i}" for i in range(3) if f"esrerank-node-{i}" != manager)
    queries = [q.title for q in askubuntu_index[:20]]
    before = {title: _top10(nodes[0], title) for title in queries}

    killed = _kill(opensearch_cluster, victim)
    survivors = [n for i, n in enumerate(nodes) if i != killed]
    try:
        # every search answers from the copies left, at once (the dead node's shards fail over)
        for node in survivors:
            assert node.ok("GET", f"/{INDEX}/_count")["count"] == QUESTIONS
        # (this test's indices: another test's index without replicas may be red with a node down)
        health = survivors[0].ok("GET", f"/_cluster/health/{INDEX},{WRITES}?wait_for_nodes=2"
                                        "&wait_for_status=yellow&timeout=90s")
        # yellow, never red: every primary is active again (a replica was promoted where one was lost)
        assert health["number_of_nodes"] == 2 and health["status"] == "yellow" and not health["timed_out"]
        assert _manager(survivors[0]) != victim or which == "data node"
        assert {title: _top10(survivors[0], title) for title in queries} == before
        # a write is acknowledged with a node down (a primary on each shard is still there)
        survivors[1].ok("PUT", f"/{WRITES}/_doc/{which.replace(' ', '-')}?refresh=true",
                        {"title": f"written while the {which} was down"})
    finally:  # the next test finds three nodes whatever happened here, each answering on its own port
        cluster_nodes.restart_node(opensearch_cluster.home, opensearch_cluster.root, killed)
        health = cluster_nodes.wait_for_nodes(nodes[0].url if killed else nodes[1].url, 3, timeout=240)
        cluster_nodes.wait_for_nodes(nodes[killed].url, 3, timeout=120)
    assert health["status"] == "green"
    for node in nodes:  # the rejoined node answers too, with everything (its copies recovered)
        assert node.ok("GET", f"/{INDEX}/_count")["count"] == QUESTIONS
        assert node.ok("GET", f"/{WRITES}/_doc/{which.replace(' ', '-')}")["found"]
    assert {title: _top10(nodes[killed], title) for title in queries} == before
