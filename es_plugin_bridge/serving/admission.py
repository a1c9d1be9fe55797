"""The sidecar's bounded queue: at most ``limit`` scoring requests received, waiting or computing at once.

waitress queues every complete request for its threads without bound: 32 clients sending windows of 100
titles all waited, p50 24.8 s, long past every connector's 5 s ``read_timeout`` (issue 48, item 3).
Here a POST is admitted once it has arrived whole (so a slow uploader holds no place) while fewer than
``limit`` are in; beyond, it is answered 503 with ``Retry-After`` at once, which a client can act on (retry
elsewhere, fall back) instead of waiting out its timeout. A slot is freed when the request's answer is
written or its connection closes. GETs (probes, ``/metrics``) are never queued nor refused.
"""

from __future__ import annotations

import threading

#: What a refused client is told to wait before trying again, in seconds.
RETRY_AFTER_S = 1


class Admission:
    """A counter of requests in; :meth:`enter` is False (refuse) at ``limit``."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the queue needs room for at least 1 request, got {limit}")
        self.limit = limit
        self.inside = 0
        self.refused = 0
        self._lock = threading.Lock()

    def enter(self) -> bool:
        with self._lock:
            if self.inside >= self.limit:
                self.refused += 1
                return False
            self.inside += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.inside -= 1

    def busy_message(self) -> str:
        return (f"the sidecar is busy (queue full: {self.limit} requests in, its --max-queue); "
                f"retry after {RETRY_AFTER_S} s")


__all__ = ["RETRY_AFTER_S", "Admission"]
