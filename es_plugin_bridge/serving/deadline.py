"""Each request's deadline, and the work dropped once it has passed or its client has gone.

A client that stops waiting (ml-commons' connector after its 5 s ``read_timeout``, the bridge after its
``--sidecar-timeout``) reads nothing the sidecar computes afterwards: under load the sidecar used to
compute every window anyway, for nobody, while the clients still waiting queued behind it (issue 48,
item 3). So a request carries a deadline: its ``X-Request-Timeout-Ms`` header (milliseconds from when
the sidecar had its first byte), else the server's default (``--deadline-ms``), below the connector's
read timeout so that an answer is sent while the connector still reads. The work is checked:

- before it starts (after waiting for a request thread), then before each encoder batch: a request
  past its deadline, or whose client closed its connection (waitress's ``client_disconnected``), or
  whose batches still to run would end past the deadline at the encoder's pace now
  (:func:`late_checker`), is dropped there and answered 504, never computed further;
- before it queues for the encoder: where the encoder's backlog at its recent pace would finish this
  request's misses later than :func:`answer_margin_s` before its deadline, it is refused at once, 503
  with ``Retry-After`` (:class:`PredictedLate`, stage ``predicted_late``): the client can fall back or
  retry now rather than wait out its timeout for a 504, and nothing is computed for it;
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


class PredictedLate(WorkAbandoned):
    """A request refused before it queues: the encoder's backlog would finish it past its deadline."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__("predicted_late", message)
        self.retry_after_s = retry_after_s


#: The least time kept, after the encoder is done, for the rest of the answer (fusing, serialising,
#: sending) and for the wait the server cannot see (before the event loop read the request's first byte).
MIN_ANSWER_MARGIN_S = 0.1
#: ... or this share of the request's deadline, when more: a 4,750 ms deadline keeps 238 ms.
ANSWER_MARGIN_SHARE = 0.05


def answer_margin_s(timeout_ms: int) -> float:
    """What the encoder must leave of a request's deadline: without it work admitted to end right at the
    deadline reached the client just after it (issue 48: 1 of 360 answers, by the client's clock)."""
    return max(MIN_ANSWER_MARGIN_S, ANSWER_MARGIN_SHARE * timeout_ms / 1000)


def refuse_if_late(predicted_s: float | None) -> None:
    """:class:`PredictedLate` when the current request's work, done in ``predicted_s`` from now, would
    end later than :func:`answer_margin_s` before its deadline (no deadline, or no prediction yet:
    nothing refused)."""
    deadline = _CURRENT.get()
    if deadline is None or predicted_s is None:
        return
    left_s = deadline.left_ms() / 1000
    margin_s = answer_margin_s(deadline.timeout_ms)
    if predicted_s > left_s - margin_s:
        wait = max(1, min(30, math.ceil(predicted_s + margin_s - left_s)))
        raise PredictedLate(f"the sidecar is busy: its encoder would finish this request in "
                            f"{predicted_s * 1000:.0f} ms, past its deadline ({deadline.timeout_ms} ms, "
                            f"{max(0.0, left_s) * 1000:.0f} ms left, {margin_s * 1000:.0f} ms of them kept "
                            f"for the answer); retry after {wait} s", wait)


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


def late_checker() -> Callable[[float], None] | None:
    """For the encoder workers: given the seconds until the current request's last batch would be done,
    WorkAbandoned (stage ``predicted_late_batch``, a 504) when that is past its deadline: the pace rose
    since it was admitted, and the batches not run yet would be computed for nobody. No margin here:
    admission kept one (:func:`refuse_if_late`); with it here too, a pace that wavers stopped work that
    would have been answered in time (``benchmarks/sidecar_load.py``, 32 clients on MiniLM: 33 of 240
    windows stopped with it, 4 without)."""
    deadline = _CURRENT.get()
    if deadline is None:
        return None

    def late(finish_s: float) -> None:
        left_s = deadline.left_ms() / 1000
        if finish_s > left_s:
            raise WorkAbandoned(
                "predicted_late_batch",
                f"the request's deadline of {deadline.timeout_ms} ms ({HEADER}) would pass before its "
                f"encoding is done ({finish_s * 1000:.0f} ms more at the encoder's pace now, "
                f"{max(0.0, left_s) * 1000:.0f} ms left): not computed further")

    return late


def checker(stage: str) -> Callable[[], None] | None:
    """A check of the current request's deadline for another thread to call (the encoder workers)."""
    deadline = _CURRENT.get()
    return None if deadline is None else (lambda: deadline.check(stage))


__all__ = ["DEFAULT_DEADLINE_MS", "HEADER", "MAX_DEADLINE_MS", "Deadline", "PredictedLate", "WorkAbandoned",
           "answer_margin_s", "check", "checker", "current", "late_checker", "parse_header", "refuse_if_late",
           "set_current"]
