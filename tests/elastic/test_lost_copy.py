"""A search failed by a node that left mid-search is sent again; any other error is not.

The error bodies are the shape OpenSearch 2.19 writes (``action/search/SearchPhaseExecutionException.java``
``metadataToXContent``: ``phase``, ``grouped``, ``failed_shards`` of ``ShardSearchFailure`` with its
``reason``; ``OpenSearchException.generateFailureXContent``: ``root_cause`` from ``guessRootCauses``), with
the node names and reasons the node-loss benchmark recorded (``benchmarks/node_loss.json``).
"""

from __future__ import annotations

import pytest

from es_plugin_bridge.elastic.cluster import lost_copy

DISCONNECTED = {
    "type": "node_disconnected_exception",
    "reason": "[esrerank-node-0][127.0.0.1:34433][indices:data/read/search[phase/fetch/id]] disconnected",
}
FETCH_FAILED = {"error": {
    "root_cause": [DISCONNECTED],
    "type": "search_phase_execution_exception",
    "reason": "",
    "phase": "fetch",
    "grouped": True,
    "failed_shards": [{"shard": 1, "index": "node-loss-manager", "node": "Xk2", "reason": DISCONNECTED}],
}, "status": 500}
BAD_QUERY = {"error": {
    "root_cause": [{"type": "query_shard_exception", "reason": "failed to create query: maxClauseCount"}],
    "type": "search_phase_execution_exception",
    "reason": "all shards failed",
    "phase": "query",
    "failed_shards": [{"shard": 0, "index": "q", "reason": {"type": "query_shard_exception",
                                                             "caused_by": {"type": "too_many_clauses"}}}],
}, "status": 400}


class Refused(Exception):
    def __init__(self, info):
        super().__init__(str(info))
        self.info = info


def test_a_lost_copy_is_told_from_a_users_mistake():
    assert lost_copy.is_lost_copy(FETCH_FAILED)
    assert lost_copy.is_lost_copy({"error": {"type": "search_phase_execution_exception", "failed_shards": [
        {"reason": {"type": "transport_exception", "caused_by": {"type": "node_not_connected_exception"}}}]}})
    assert not lost_copy.is_lost_copy(BAD_QUERY)
    assert not lost_copy.is_lost_copy({"error": {"type": "index_not_found_exception", "reason": "no index"}})
    assert not lost_copy.is_lost_copy(None)


def test_msearch_items_are_read_one_by_one():
    assert lost_copy.msearch_lost_copy({"responses": [{"hits": {"hits": []}, "status": 200},
                                                      {**FETCH_FAILED}]})
    assert not lost_copy.msearch_lost_copy({"responses": [{"hits": {"hits": []}}, {**BAD_QUERY}]})


def test_a_search_is_sent_again_until_a_live_copy_answers():
    outcomes = [Refused(FETCH_FAILED), {"responses": [FETCH_FAILED]}, {"responses": [{"hits": {}}]}]
    pauses: list[float] = []

    def send():
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    answer = lost_copy.retrying(send, lost_copy.msearch_lost_copy, lambda exc: exc.info, pauses.append)
    assert answer == {"responses": [{"hits": {}}]} and pauses == list(lost_copy.PAUSES_S[:2])


def test_any_other_error_is_raised_at_once_and_the_last_try_is_the_callers():
    tries: list[int] = []

    def bad():
        tries.append(1)
        raise Refused(BAD_QUERY)

    with pytest.raises(Refused):
        lost_copy.retrying(bad, lambda _: False, lambda exc: exc.info, lambda _: None)
    assert len(tries) == 1

    def always_lost():
        tries.append(1)
        raise Refused(FETCH_FAILED)

    tries.clear()
    with pytest.raises(Refused):
        lost_copy.retrying(always_lost, lambda _: False, lambda exc: exc.info, lambda _: None)
    assert len(tries) == len(lost_copy.PAUSES_S) + 1
