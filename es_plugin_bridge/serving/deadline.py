"""Each request's deadline, and the work dropped once it has passed or its client has gone.

A client that stops waiting (ml-commons' connector after its 5 s ``read_timeout``, the bridge after its
``--sidecar-timeout``) reads nothing the sidecar computes afterwards: under load the sidecar used to
compute every window anyway, for nobody, while the clients still waiting queued behind it (issue 48,
item 3). So a request carries a deadline: its ``X-Request-Timeout-Ms`` header (milliseconds from when
the sidecar had its first byte), else the server's default (``--deadline-ms``), below the connector's
read timeout so that an answer is sent while the connector still reads. The work is checked:

- before it starts (after waiting for a request thread), then before each encoder batch: a request
  past its deadline, or whose client closed its connection (waitress's ``client_disconnected``), is
  dropped there and answered 504, never computed further;
- after it is done: an answer finished past the deadline is not sent as a late 200 but as 504 too,
  and counted as computed for nobody (``esrerank_work_dropped{stage="finished_late"}``).

The deadline of the request being served lives in a context variable, so ``Service`` (no HTTP in it)
and the encoder workers check it without a parameter threaded through every call.
"""

from __future__ import annotations

import contextvars
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from es_plugin_bridge.request_deadline import HEADER, MAX_DEADLINE_MS

#: The server's default: half a second below ml-commons' connector ``read_timeout`` of 5 s
#: (``elastic/modes/rerank.py`` ``CLIENT_CONFIG``), so the answer reaches the connector in time.
DEFAULT_DEADLINE_MS = 4500


class WorkAbandoned(Exception):
    """A request whose work stopped: its deadline passed, or its client went; ``stage`` says where."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage, self.message = stage, message


def parse_header(value: str | None) -> int | None:
    """The header's milliseconds, or None when absent; ValueError naming the rule for a bad value."""
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_DEADLINE_MS:
        raise ValueError(f"{HEADER} must be a whole number of milliseconds in 1..{MAX_DEADLINE_MS}")
    return int(text)


@dataclass(frozen=True)
class Deadline:
    """When one request's answer stops being worth computing (``time.monotonic()``), and its client."""

    at: float
    timeout_ms: int
    gone: Callable[[], bool] = lambda: False

    @classmethod
    def starting(cls, received: float, timeout_ms: int, gone: Callable[[], bool] | None = None) -> Deadline:
        return cls(received + timeout_ms / 1000, timeout_ms, gone or (lambda: False))

    def left_ms(self) -> float:
        return (self.at - time.monotonic()) * 1000

    def check(self, stage: str) -> None:
        """WorkAbandoned when the deadline has passed or the client has closed its connection."""
        if self.gone():
            raise WorkAbandoned(stage, f"the client closed its connection before the work was done ({stage})")
        late = -self.left_ms()
        if late >= 0:
            raise WorkAbandoned(stage, f"the request's deadline of {self.timeout_ms} ms ({HEADER}) passed "
                                       f"{math.ceil(late)} ms ago, {stage.replace('_', ' ')}: not computed")


_CURRENT: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar("esrerank_deadline", default=None)


def current() -> Deadline | None:
    """The deadline of the request this thread serves (None outside a request: no deadline)."""
    return _CURRENT.get()


def set_current(deadline: Deadline | None) -> contextvars.Token:
    return _CURRENT.set(deadline)


def check(stage: str) -> None:
    """:meth:`Deadline.check` of the current request, if any."""
    deadline = _CURRENT.get()
    if deadline is not None:
        deadline.check(stage)


def checker(stage: str) -> Callable[[], None] | None:
    """A check of the current request's deadline for another thread to call (the encoder workers)."""
    deadline = _CURRENT.get()
    return None if deadline is None else (lambda: deadline.check(stage))


__all__ = ["DEFAULT_DEADLINE_MS", "HEADER", "MAX_DEADLINE_MS", "Deadline", "WorkAbandoned", "check",
           "checker", "current", "parse_header", "set_current"]
