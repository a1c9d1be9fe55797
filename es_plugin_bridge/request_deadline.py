"""The header a client states its deadline in, for the sidecar that drops work past it
(``serving.deadline``) and every client that sends it (the bridge, ``es index``'s embedder, the
connectors ``es setup`` registers). At the package's floor so a client imports no serving code.
"""

from __future__ import annotations

#: Milliseconds from when the sidecar has the request's first byte; past them nobody reads the answer.
HEADER = "X-Request-Timeout-Ms"
#: The longest deadline a client may ask for (10 minutes): past that, it is a mistake, not a wish.
MAX_DEADLINE_MS = 600_000
#: Taken off a client's own timeout: the time to connect and send, and for the answer to travel back.
MARGIN_MS = 250


def header_value(timeout_s: float) -> str:
    """The header's value for a client that waits ``timeout_s`` seconds for the whole answer."""
    return str(max(1, min(MAX_DEADLINE_MS, int(timeout_s * 1000) - MARGIN_MS)))


__all__ = ["HEADER", "MARGIN_MS", "MAX_DEADLINE_MS", "header_value"]
