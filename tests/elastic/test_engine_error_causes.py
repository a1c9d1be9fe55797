"""Engine errors keep their cause, name the node that answered, and a missing shard's 503 is sent once;
no search answer from part of the shards is used (issue 48, findings 4 and 5).

The error bodies are real: captured from an OpenSearch 2.19.1 node (``data/engine_errors.json`` says
how); Elasticsearch answers errors in the same shape (``ElasticsearchException.generateThrowableXContent``).
The Elasticsearch client is elasticsearch-py itself talking to the ``recorder`` (``es_recorder``), which
shows what the product sends and how it reads the answer; the OpenSearch client is opensearch-py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from es_plugin_bridge.elastic.cluster.connection import Connection, call
from es_plugin_bridge.elastic.cluster.engine_errors import answering_node, reason_of
from es_plugin_bridge.elastic.cluster.whole_answers import PartialAnswer, missing_shards
from es_plugin_bridge.errors import UserError

CAPTURED = json.loads((Path(__file__).parent / "data" / "engine_errors.json").read_text(encoding="utf-8"))
SPEC_FILE = Path(__file__).resolve().parents[1] / "tools" / "es_spec_shapes.json"
SPEC = json.loads(SPEC_FILE.read_text(encoding="utf-8"))["classes"]
ES_ROOT = {"name": "es01", "version": {"number": "9.1.0", "build_flavor": "default"},
           "tagline": "You Know, for Search"}
OS_ROOT = {"name": "os01", "version": {"distribution": "opensearch", "number": "2.19.1"}}
#: Elasticsearch's answer to a search of 3 shards of which one failed: ``SearchResponse`` with its
#: ``_shards`` (``ShardStatistics``: total, successful, skipped, failed, failures).
ES_ONE_FAILED = {"took": 3, "timed_out": False,
                 "_shards": {"total": 3, "successful": 2, "skipped": 0, "failed": 1,
                             "failures": [{"shard": 2, "index": "questions", "node": "n2",
                                           "reason": {"type": "node_disconnected_exception",
                                                      "reason": "[es02] disconnected"}}]},
                 "hits": {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []}}
#: Two of three shards skipped by the can-match phase: counted in ``successful`` (whole).
ES_TWO_SKIPPED = {**ES_ONE_FAILED, "_shards": {"total": 3, "successful": 3, "skipped": 2, "failed": 0}}


def body(name: str) -> dict[str, Any]:
    return CAPTURED[name]["body"]  # type: ignore[no-any-return]


def test_the_missing_shards_are_named_from_caused_by():
    """The top error of a missing shard's 503 has an empty reason and no root cause; the line names
    the shards from ``caused_by``."""
    line = reason_of(body("missing_shard_refused"))
    assert line.startswith("search_phase_execution_exception, caused by search_phase_execution_exception: "
                           "Search rejected due to missing shards [[part][1]]")


def test_a_failed_shard_is_named_with_its_deepest_cause():
    line = reason_of(body("script_error_on_a_shard"))
    assert line == ("search_phase_execution_exception: all shards failed; shard [ok][0]: "
                    "script_exception: runtime error, caused by illegal_argument_exception: "
                    "No field found for [nofield] in mapping")


def searches(rec: Any) -> list[dict[str, Any]]:
    return [r for r in rec.requests if r["path"].endswith(("/_search", "/_msearch"))]


@pytest.mark.parametrize(("root", "engine"), [(ES_ROOT, "Elasticsearch"), (OS_ROOT, "OpenSearch")])
def test_a_missing_shard_503_is_sent_once_and_names_the_shard_and_the_node(recorder, root, engine):
    """Both clients retried a 503 (elastic-transport's and opensearch-py's ``retry_on_status``): four
    requests, and opensearch-py marked each node dead. Now: one request, the error names the shard and
    the node that answered, although ``--es-url`` names the node twice (fail-over still possible)."""
    rec, url = recorder
    rec.answers[("POST", "/questions/_search")] = (503, body("missing_shard_refused"))
    rec.answers[("GET", "/")] = root
    port = url.rpartition(":")[2]
    client = Connection(url=f"{url},http://localhost:{port}").client()
    with pytest.raises(UserError) as err:
        call("searching questions", client.search, index="questions", query={"match_all": {}})
    heads = {f"searching questions: {engine} at {host}:{port} answered 503: "
             "search_phase_execution_exception, caused by" for host in ("127.0.0.1", "localhost")}
    assert any(str(err.value).startswith(head) for head in heads), err.value
    assert "[[part][1]]" in str(err.value)
    assert len(searches(rec)) == 1


@pytest.mark.parametrize("root", [ES_ROOT, OS_ROOT])
def test_an_msearch_items_error_is_read_with_its_cause_and_the_node_that_answered(recorder, root):
    """An ``_msearch`` answers 200 and each failed search as an item ``{"error": …, "status": …}``
    (``action/search/MultiSearchResponse.java``, ``Item.toXContent``: a failure is written as ``error``
    with the item's ``status``); the hybrid modes read such an item with ``reason_of`` (the missing shard is
    in ``caused_by``) and name the node that answered the whole request (``answering_node``: elasticsearch-py
    has it in the response's ``meta.node``; for opensearch-py the product's connection notes it)."""
    rec, url = recorder
    item = {**body("missing_shard_refused"), "status": 503}
    rec.answers[("POST", "/questions/_msearch")] = {"took": 1, "responses": [ES_TWO_SKIPPED, item]}
    rec.answers[("GET", "/")] = root
    client = Connection(url=url).client()
    answer = client.msearch(index="questions", searches=[{}, {"size": 1}, {}, {"size": 1}])
    failed = answer["responses"][1]
    assert failed["status"] == 503
    assert "Search rejected due to missing shards [[part][1]]" in reason_of(failed)
    assert answering_node(answer) == url.split("://", 1)[1]


@pytest.mark.parametrize("root", [ES_ROOT, OS_ROOT])
def test_every_search_refuses_partial_results(recorder, root):
    """``allow_partial_search_results=false``: a ``_search`` URL parameter, a field of each ``_msearch``
    header (the specification: ``SearchRequest`` query parameters, ``MultisearchHeader``)."""
    assert "allow_partial_search_results" in SPEC["SearchRequest.query_parameters"]["fields"]
    assert "allow_partial_search_results" in SPEC["MultisearchHeader"]["fields"]
    rec, url = recorder
    rec.answers[("POST", "/questions/_search")] = ES_TWO_SKIPPED
    rec.answers[("POST", "/questions/_msearch")] = {"took": 1, "responses": [ES_TWO_SKIPPED, ES_TWO_SKIPPED]}
    rec.answers[("GET", "/")] = root
    client = Connection(url=url).client()
    client.search(index="questions", query={"match_all": {}})
    client.msearch(index="questions", searches=[{}, {"query": {"match_all": {}}}, {}, {"size": 1}])
    search, msearch = searches(rec)
    assert "allow_partial_search_results=false" in search["query"]
    headers = [json.loads(line) for line in msearch["body"].splitlines()[::2]]
    assert headers == [{"allow_partial_search_results": False}] * 2


@pytest.mark.parametrize("root", [ES_ROOT, OS_ROOT])
def test_an_answer_from_part_of_the_shards_is_refused(recorder, root):
    """A 200 that lacks a shard (a cluster default, a proxy) is refused; each ``_msearch`` item too."""
    rec, url = recorder
    partial = body("missing_shard_default")
    rec.answers[("POST", "/questions/_search")] = partial
    rec.answers[("POST", "/questions/_msearch")] = {"took": 1, "responses": [ES_TWO_SKIPPED, ES_ONE_FAILED]}
    rec.answers[("GET", "/")] = root
    client = Connection(url=url).client()
    with pytest.raises(PartialAnswer, match=r"^searching questions: 1 of 2 shards did not answer \(0 failed, "
                                            r"1 without any copy\); partial results are refused$"):
        call("searching questions", client.search, index="questions", query={"match_all": {}})
    with pytest.raises(PartialAnswer, match=r"search 2 of 2 of the _msearch: 1 of 3 shards did not answer "
                                            r"\(1 failed, 0 without any copy\)"):
        client.msearch(index="questions", searches=[{}, {"size": 1}, {}, {"size": 1}])


def test_the_shards_rule():
    """Whole iff ``failed == 0`` and ``successful == total``; skipped shards count as successful
    (``AbstractSearchAsyncAction.skipShard`` increments both ``successfulOps`` and ``skippedOps``)."""
    assert missing_shards(ES_TWO_SKIPPED) is None
    assert missing_shards(body("missing_shard_default")) is not None  # OpenSearch: failed 0, successful 1/2
    assert missing_shards(ES_ONE_FAILED) is not None
    item = body("msearch_one_refused_one_partial")["responses"][1]
    assert item["status"] == 200 and missing_shards(item) is not None
