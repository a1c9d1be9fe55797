"""The HTTP requests this process sends while a block runs, by the host they go to: what one ``es
evaluate`` search of a mode costs in round trips (to the engine, to the sidecar), beside its quality.

Why at ``http.client``: the engine is reached through elasticsearch-py or opensearch-py (both over
urllib3, whose connections are ``http.client.HTTPConnection``\\ s), the sidecar through ``http.client``
itself (``bridge/connection_pool.py``) or ``urllib``; every one of them sends a request line through
``HTTPConnection.putrequest``, so one counter there sees them all, whichever client library is
installed, and no client has to be wrapped. A retried request counts twice: it was sent twice. The
engine's own calls to the sidecar (modes ``rerank`` and ``native``) leave from the engine, not from here,
and are not counted.

The counter is installed only while a :func:`counting` block is open (``es evaluate``'s run) and removed
when the last one closes.
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

_LOCK = threading.Lock()
_OPEN: list[Counter[str]] = []
_ORIGINAL = http.client.HTTPConnection.putrequest


def _counted_putrequest(self: http.client.HTTPConnection, method: str, url: str, *args: Any,
                        **kwargs: Any) -> None:
    with _LOCK:
        for counter in _OPEN:
            counter[f"{self.host}:{self.port}"] += 1
    _ORIGINAL(self, method, url, *args, **kwargs)


def host_of(url: str) -> str:
    """``host:port`` of a URL as ``http.client`` names its connection (default ports filled in)."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


@contextmanager
def counting() -> Iterator[Counter[str]]:
    """A counter of the requests sent while the block runs, keyed ``host:port``."""
    counter: Counter[str] = Counter()
    with _LOCK:
        if not _OPEN:
            http.client.HTTPConnection.putrequest = _counted_putrequest  # type: ignore[method-assign]
        _OPEN.append(counter)
    try:
        yield counter
    finally:
        with _LOCK:
            _OPEN.remove(counter)
            if not _OPEN:
                http.client.HTTPConnection.putrequest = _ORIGINAL  # type: ignore[method-assign]


def by_target(sent: Counter[str], engine: Sequence[str], sidecar: str) -> dict[str, int]:
    """``sent`` as ``{"engine": n, "sidecar": n}`` (plus ``"other"`` where some went elsewhere), given the
    engine's node URLs and the sidecar's URL."""
    nodes = {host_of(url) for url in engine}
    side = host_of(sidecar)
    out = {"engine": sum(n for h, n in sent.items() if h in nodes),
           "sidecar": sum(n for h, n in sent.items() if h == side and h not in nodes)}
    other = sum(sent.values()) - out["engine"] - out["sidecar"]
    return {**out, **({"other": other} if other else {})}
