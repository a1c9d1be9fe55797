"""The engine's own guarantees when one node of the three dies (``test_cluster_node_loss`` checks them
while its node is down and after it rejoins): an index of 3 shards with 1 replica loses nothing and
keeps answering when any one node dies — a data node or the elected cluster manager — and is whole and
green again once the node restarts and rejoins.

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

from es_commands import TITLES

from es_plugin_bridge.data.spec import read_spec

INDEX = "cluster-askubuntu"
WRITES = "cluster-writes"  # written to while a node is down (the questions' statistics stay as they were)
QUESTIONS = 2000
#: The titles whose top 10 must be the same before, during and after the loss.
QUERIES = 20


def build_index(cluster) -> list:
    """2,000 real AskUbuntu titles in an index of 3 shards, 1 replica (every shard on two nodes), written
    with the engine's own bulk API (what the engine keeps, apart from the product)."""
    first = cluster.nodes[0]
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


def top10(node, title: str) -> list[str]:
    body = {"size": 10, "query": {"match": {"title": title}}}
    hits = node.ok("POST", f"/{INDEX}/_search?search_type=dfs_query_then_fetch", body)["hits"]["hits"]
    return [h["_id"] for h in hits]


def top10s(node, questions: list) -> dict[str, list[str]]:
    return {q.title: top10(node, q.title) for q in questions[:QUERIES]}


def manager(node) -> str:
    """The elected cluster manager's node name, as ``node`` sees it."""
    status, answer = node.call("GET", "/_cluster/state/cluster_manager_node,nodes")
    assert status == 200, answer
    return answer["nodes"][answer["cluster_manager_node"]]["name"]


def check_while_down(cluster, killed: int, which: str, before: dict[str, list[str]]) -> None:
    """With node ``killed`` down: every survivor counts every question, the indices are yellow, never
    red (a replica was promoted where a primary was lost), a new manager was elected if the manager
    died, the top 10s are the healthy cluster's, and a write is acknowledged."""
    survivors = [n for i, n in enumerate(cluster.nodes) if i != killed]
    for node in survivors:
        assert node.ok("GET", f"/{INDEX}/_count")["count"] == QUESTIONS
    # (these indices only: another test's index without replicas may be red with a node down)
    health = survivors[0].ok("GET", f"/_cluster/health/{INDEX},{WRITES}?wait_for_nodes=2"
                                    "&wait_for_status=yellow&timeout=90s")
    assert health["number_of_nodes"] == 2 and health["status"] == "yellow" and not health["timed_out"]
    assert manager(survivors[0]) != f"esrerank-node-{killed}" or which == "data node"
    assert {title: top10(survivors[0], title) for title in before} == before
    # a write is acknowledged with a node down (a primary of each shard is still there)
    survivors[1].ok("PUT", f"/{WRITES}/_doc/{which.replace(' ', '-')}?refresh=true",
                    {"title": f"written while the {which} was down"})


def check_after_rejoin(cluster, killed: int, which: str, before: dict[str, list[str]]) -> None:
    """The rejoined node answers too, with everything (its copies recovered), and as before."""
    for node in cluster.nodes:
        assert node.ok("GET", f"/{INDEX}/_count")["count"] == QUESTIONS
        assert node.ok("GET", f"/{WRITES}/_doc/{which.replace(' ', '-')}")["found"]
    assert {title: top10(cluster.nodes[killed], title) for title in before} == before
