"""An engine's error answer in one line that keeps its cause: what a user needs to act on it.

Both engines answer an error as ``{"error": {"type", "reason", "root_cause": [...], "caused_by": {...},
"failed_shards": [{"index", "shard", "node", "reason": {...}}]}, "status": N}``
(``OpenSearchException.generateThrowableXContent`` / ``ElasticsearchException``;
``SearchPhaseExecutionException.metadataToXContent`` writes ``failed_shards``). The top error alone can be
empty: a search refused for a shard without any copy answers ``search_phase_execution_exception`` with
``reason ""`` and ``root_cause []``, the words ``Search rejected due to missing shards [[s0][0]]`` only in
``caused_by`` (OpenSearch's ``AbstractSearchAsyncAction.run``, ``allowPartialSearchResults`` false).
So the line names the top error, the deepest ``caused_by``, and each failed shard's reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

#: Failed shards named one by one; the rest are counted.
SHARDS_NAMED = 3


def _clause(error: Mapping[str, Any]) -> str:
    """``type: reason`` (just the type when the reason is empty)."""
    kind, reason = str(error.get("type") or "error"), str(error.get("reason") or "").strip()
    return f"{kind}: {reason}" if reason else kind


def _deepest(error: Mapping[str, Any]) -> Mapping[str, Any]:
    """The last error of the ``caused_by`` chain (the one that says what happened)."""
    seen = 0
    while isinstance(error.get("caused_by"), Mapping) and seen < 32:
        error, seen = error["caused_by"], seen + 1
    return error


def _with_cause(error: Mapping[str, Any]) -> str:
    """An error and, when it has one, its deepest cause."""
    deepest = _deepest(error)
    return _clause(error) if deepest is error else f"{_clause(error)}, caused by {_clause(deepest)}"


def _failed_shards(error: Mapping[str, Any]) -> list[str]:
    """``shard [index][n]: reason`` of each failed shard, identical reasons once."""
    lines: list[str] = []
    for failure in error.get("failed_shards") or ():
        if not isinstance(failure, Mapping):
            continue
        reason = failure.get("reason")
        text = _with_cause(reason) if isinstance(reason, Mapping) else str(reason or "unknown")
        line = f"shard [{failure.get('index', '?')}][{failure.get('shard', '?')}]: {text}"
        if line not in lines:
            lines.append(line)
    if len(lines) > SHARDS_NAMED:
        return [*lines[:SHARDS_NAMED], f"{len(lines) - SHARDS_NAMED} more failed shards"]
    return lines


def reason_of(body: Any) -> str:
    """One line of an error answer (or an ``_msearch`` item's ``error``): the top error, its deepest
    ``caused_by``, each failed shard's reason; the root cause when nothing else says more."""
    error = body.get("error") if isinstance(body, Mapping) and "error" in body else body
    if not isinstance(error, Mapping):
        return str(error or "")
    parts = [_with_cause(error), *_failed_shards(error)]
    roots = [r for r in error.get("root_cause") or () if isinstance(r, Mapping)]
    if len(parts) == 1 and roots and _clause(roots[0]) not in parts[0]:
        parts.append(f"root cause {_clause(roots[0])}")
    return "; ".join(parts)


#: ``host:port`` of the node that answered this thread's last request (opensearch-py's answers do not
#: say; its connection notes it, ``opensearch_client``).
_ANSWERED: ContextVar[str | None] = ContextVar("esrerank_answered_by", default=None)


def note_answered_by(node: str) -> None:
    _ANSWERED.set(node)


def answering_node(answer: Any) -> str | None:
    """``host:port`` of the node that answered ``answer``, when known: an ``_msearch`` item's error came
    from the node that answered the whole request (elasticsearch-py's response has it in ``meta.node``;
    for opensearch-py, the node the connection noted for this thread)."""
    node = getattr(getattr(answer, "meta", None), "node", None)
    if node is not None and getattr(node, "host", None):
        return f"{node.host}:{node.port}"
    return _ANSWERED.get()


def node_of(url: str) -> str:
    """``host:port`` of a node's URL (how messages name the node that answered)."""
    return url.split("://", 1)[-1].rstrip("/")
