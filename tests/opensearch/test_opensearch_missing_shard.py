"""A shard without any copy, on a real OpenSearch 2.19.1 node (issue 48, findings 4 and 5).

The index has two shards, no replica and ``index.routing.allocation.total_shards_per_node: 1``: on one
node, shard 1 can never be allocated (``cluster/routing/allocation/decider/ShardsLimitAllocationDecider``),
as when the node holding a shard's only copy is gone. Shard 0 holds real AskUbuntu titles.

- The product's search fails in one line that names the missing shard (from the 503's ``caused_by``:
  the top error's reason is empty) and the node that answered, sent once although ``--es-url`` names two
  URLs of the node (before: opensearch-py retried the 503 on each, four requests).
- Asked with OpenSearch's default (partial results allowed), the node answers 200 from shard 0 alone,
  ``_shards {total 2, successful 1, failed 0}``: the product refuses that answer, and each such
  ``_msearch`` item.
"""

from __future__ import annotations

import json

import pytest
from es_commands import TITLES
from recording_proxy import recording

from es_plugin_bridge.elastic.cluster.connection import Connection, call
from es_plugin_bridge.elastic.cluster.whole_answers import PartialAnswer, check_whole, check_whole_msearch
from es_plugin_bridge.errors import UserError

pytestmark = [pytest.mark.engine]

INDEX = "missing-shard"


@pytest.fixture(scope="module")
def half_allocated(opensearch):
    """``INDEX`` with shard 0 started and shard 1 unassigned, holding 200 real titles (all on shard 0)."""
    opensearch.call("DELETE", f"/{INDEX}")
    opensearch.ok("PUT", f"/{INDEX}", {"settings": {"number_of_shards": 2, "number_of_replicas": 0,
                                                     "index.routing.allocation.total_shards_per_node": 1}})
    titles = [line.split("\t")[1] for line in TITLES.read_text(encoding="utf-8").splitlines()[:200]]
    lines = "".join(json.dumps({"index": {"_id": f"q{n}"}}) + "\n" + json.dumps({"title": t}) + "\n"
                    for n, t in enumerate(titles))
    answer = opensearch.ok("POST", f"/{INDEX}/_bulk?refresh=true", lines.encode())
    stored = sum(1 for item in answer["items"] if item["index"].get("status") == 201)
    assert stored > 0, "no title landed on the allocated shard"
    yield stored
    opensearch.call("DELETE", f"/{INDEX}")


def test_the_search_fails_once_naming_the_missing_shard_and_the_node(opensearch, half_allocated):
    with recording(opensearch.url) as first, recording(opensearch.url) as second:
        client = Connection(url=f"{first.url},{second.url}").client()
        with pytest.raises(UserError) as err:
            call(f"searching {INDEX}", client.search, index=INDEX,
                 query={"match": {"title": "install ubuntu"}})
        sent = [r for r in first.requests + second.requests if r[1].endswith("/_search")]
    message = str(err.value)
    assert "\n" not in message and "Search rejected due to missing shards [[missing-shard][1]]" in message
    proxies = {first.url.split("://")[1], second.url.split("://")[1]}
    assert any(message.startswith(f"searching {INDEX}: OpenSearch at {p} answered 503: ") for p in proxies)
    assert len(sent) == 1


def test_an_answer_from_the_other_shard_alone_is_refused(opensearch, half_allocated):
    """OpenSearch's default answers 200 without the missing shard; the product's check refuses it."""
    answer = opensearch.ok("POST", f"/{INDEX}/_search", {"query": {"match": {"title": "install ubuntu"}}})
    assert answer["_shards"] == {"total": 2, "successful": 1, "skipped": 0, "failed": 0}
    assert answer["hits"]["hits"], "shard 0 answers hits"
    with pytest.raises(PartialAnswer, match=r"1 of 2 shards did not answer \(0 failed, 1 without any copy\)"):
        check_whole(answer, INDEX)
    lines = b'{}\n{"query": {"match_all": {}}}\n'
    with pytest.raises(PartialAnswer, match=r"search 1 of 1 of the _msearch: 1 of 2 shards"):
        check_whole_msearch(opensearch.ok("POST", f"/{INDEX}/_msearch", lines), INDEX)
