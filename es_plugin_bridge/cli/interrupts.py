"""SIGTERM (and SIGHUP) ended as Ctrl-C does: a ``KeyboardInterrupt`` in the main thread, so every
``with`` and ``finally`` on the way out runs — ``es evaluate`` removes what it made on the cluster
(``elastic.run_cleanup``) instead of dying with its throw-away index left behind. Python's default for
SIGTERM ends the process at once, running nothing."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class Terminated(KeyboardInterrupt):
    """The process was asked to stop by a signal other than SIGINT."""


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"stopped by {signal.Signals(signum).name}")


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated`; the previous handlers after.
    Outside the main thread (where Python cannot set handlers) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = [getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)]
    previous = {signum: signal.signal(signum, _raise) for signum in wanted}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:  # None: set outside Python, cannot be set back
                signal.signal(signum, handler)
