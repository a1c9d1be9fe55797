"""A bounded read-ahead: an iterator's next items computed in one worker thread while the caller works on
the last one (``es index`` embeds the next batch while the cluster stores the one before).

Bounded (``depth`` items wait at most), so a slow consumer holds back the producer and memory stays
small; an exception of the producer is raised in the caller at the item where it happened, so nothing
is skipped silently. Closing it (leaving the ``with``, or a stop such as Ctrl-C in the caller) tells the
worker to stop after the item it is computing; what it computed and the caller never took is dropped,
which the caller accounts for (``bulk.py`` counts a batch as read only when it books it).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")

_POLL_SECONDS = 0.1


class _Done:
    """The end of the items."""


class _Raised:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class _Worker(Generic[T]):
    """Computes the next item only when fewer than ``depth`` wait untaken (a slot is free)."""

    def __init__(self, source: Iterator[T], depth: int) -> None:
        self.source = source
        self.items: queue.SimpleQueue[T | _Done | _Raised] = queue.SimpleQueue()
        self.slots = threading.Semaphore(depth)
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="esrerank-read-ahead", daemon=True)

    def _run(self) -> None:
        try:
            while self._slot():
                try:
                    item: T | _Done | _Raised = next(self.source)
                except StopIteration:
                    item = _Done()
                self.items.put(item)
                if isinstance(item, _Done):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, raised there
            self.items.put(_Raised(exc))

    def _slot(self) -> bool:
        """Wait for a free slot; False once the caller stopped taking items."""
        while not self.stopping.is_set():
            if self.slots.acquire(timeout=_POLL_SECONDS):
                return not self.stopping.is_set()
        return False

    def __iter__(self) -> Iterator[T]:
        while True:
            item = self.items.get()
            self.slots.release()
            if isinstance(item, _Done):
                return
            if isinstance(item, _Raised):
                raise item.exc
            yield item


@contextmanager
def read_ahead(source: Iterator[T], depth: int = 1) -> Iterator[Iterator[T]]:
    """``source``'s items, each computed in a worker thread while the caller handles the one before;
    at most ``depth`` wait computed (``depth`` >= 1)."""
    if depth < 1:
        raise ValueError("depth must be >= 1")
    worker = _Worker(source, depth)
    worker.thread.start()
    try:
        yield iter(worker)
    finally:
        worker.stopping.set()
        # The worker finishes the item it is computing (an HTTP call has its own timeout) and stops; the
        # caller need not wait for it (a daemon thread), but one that ends quickly is joined.
        worker.thread.join(timeout=_POLL_SECONDS * 2)
