"""A search that failed because a node left mid-search is sent again: another copy can answer it.

Within one phase the engine moves to a shard's next copy when one fails, but not between phases
(``action/search/AbstractSearchAsyncAction.java``, ``onShardFailure``; the query phase of
``dfs_query_then_fetch`` and the fetch phase go to the copy that answered the phase before). A node killed
between two phases therefore fails the whole search (partial results are refused,
``whole_answers.WHOLE``) with ``node_disconnected_exception`` or the like, although every shard still
has a live copy. The same search sent again is routed among the copies still active
(``OperationRouting``), so it is retried, a bounded number of times with a short pause while the cluster
manager removes the node. Any other error (a bad query, a missing index, a refused credential) is raised
at once: only these transport-level causes mean "that copy is gone".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

#: The error types that say a shard copy became unreachable (OpenSearch's and Elasticsearch's names:
#: ``transport/NodeDisconnectedException``, ``NodeNotConnectedException``, ``node/NodeClosedException``,
#: ``action/NoShardAvailableActionException``, ``transport/SendRequestTransportException``,
#: ``ConnectTransportException``).
LOST_COPY_TYPES = frozenset({
    "node_disconnected_exception", "node_not_connected_exception", "node_closed_exception",
    "no_shard_available_action_exception", "send_request_transport_exception",
    "connect_transport_exception",
})
#: Pauses before each retry (seconds): the cluster manager's fault detection removes a killed node within
#: a few seconds (``cluster.fault_detection.follower_check`` 1 s × 3).
PAUSES_S = (0.5, 1.5, 3.0)


def _types(error: Any) -> Iterator[str]:
    """Every ``type`` in an error answer: the error, its root causes, causes and failed shards' reasons."""
    if isinstance(error, Mapping):
        if isinstance(error.get("type"), str):
            yield error["type"]
        for key in ("error", "caused_by", "reason"):
            yield from _types(error.get(key))
        for key in ("root_cause", "failed_shards"):
            for item in error.get(key) or ():
                yield from _types(item)


def is_lost_copy(error: Any) -> bool:
    """Whether an error answer (an ``{"error": ...}`` body or an ``_msearch`` item) says a copy was lost."""
    return any(kind in LOST_COPY_TYPES for kind in _types(error))


def msearch_lost_copy(answer: Mapping[str, Any]) -> bool:
    """Whether any item of an ``_msearch`` answer failed because a copy was lost."""
    return any(is_lost_copy(item.get("error")) for item in answer.get("responses") or ())


def retrying(send: Callable[[], T], lost: Callable[[Any], bool], error_body: Callable[[Exception], Any],
             sleep: Callable[[float], None] = time.sleep) -> T:
    """``send()`` again after each :data:`PAUSES_S` pause while it fails (an exception whose body
    ``error_body`` reads) or answers (``lost`` of the answer) because a copy was lost; the last try's
    outcome is the caller's, as it would have been without retries."""
    for pause in PAUSES_S:
        try:
            answer = send()
        except Exception as exc:
            if not is_lost_copy(error_body(exc)):
                raise
        else:
            if not lost(answer):
                return answer
        sleep(pause)
    return send()
