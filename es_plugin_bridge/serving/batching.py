"""The sidecar's encoder calls, shared by every request thread: a few workers, one onnxruntime call each.

Encoding cache misses is nearly all of an uncached request's time (the profile of a rerank of 100
AskUbuntu titles by the transformer: 97 % in ``InferenceSession.run``). Left to the request threads,
each runs its own calls: a lone request uses one core (the session has one intra-op thread), and 16
concurrent ones either queue behind the request threads or, with more intra-op threads, oversubscribe
the cores. Here the request threads hand their calls (``ModelDirectory.runs``: the encoder's schedule,
``serving.encode_schedule``) to ``workers`` threads, so:

- a lone request's batches run on every worker at once (a rerank of 100 uses both cores of a 2-core
  machine with single-threaded sessions, which degrade less than intra-op threads when other work
  shares the machine);
- never more than ``workers`` calls run at once, however many requests are in flight;
- a worker that takes a batch smaller than ``batch_size`` rows also takes the batches queued behind it
  that the schedule lets share its call (``Run.joins``: any for ``batched``, the same shape for
  ``length-buckets``) while they fit, from any request, and runs them as one call (dynamic batching:
  sixteen clients embedding 8 texts each become calls of 16 rows, not 8 calls of 8).

What a batch computes does not depend on which thread runs it: a request's answer is the one the same
batches give in the request's own thread (``vectors`` of a pool and ``ModelDirectory.vectors_from_ids``
agree, ``tests/serving/test_serving_batching.py``). Nor on which texts share it: merging follows the
schedule that keeps a row's output independent of its mates, so merging requests never changes a vector
(``tests/exporters/test_batch_independence.py``). An error in a call is raised in every request whose
rows it held. A request may give a ``check`` (``serving.deadline``: its deadline or its client gone): a
worker calls it before running that request's next batch, and a batch whose check raises is not run;
the request gets the error, its other batches are skipped too. Workers are daemon threads started on
first use; :meth:`EncoderPool.close` stops them.

The pool also knows its pace (a moving average of seconds per fed row of its recent calls) and its
backlog (rows queued or running), so :meth:`EncoderPool.predicted_s` says when work handed to it now
would be done: a request that cannot finish before its deadline is refused before it queues
(``serving.deadline.refuse_if_late``) rather than computed for nobody.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from es_plugin_bridge.serving.encode_schedule import Run
from es_plugin_bridge.serving.inputs import Encoded
from es_plugin_bridge.serving.model_dir import ModelDirectory

#: The weight of the newest call in the pace's moving average (about the last 10 calls count).
PACE_WEIGHT = 0.1


@dataclass
class _Job:
    """One request's encoder work: its output and how many of its batches are still to run."""

    out: np.ndarray
    left: int
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    check: Callable[[], None] | None = None  # raises when the request's batches are not worth running
    late: Callable[[float], None] | None = None  # given when its last batch would be done; raises: too late
    skipped: int = 0  # batches not run (their check raised)


@dataclass
class _Batch:
    """One run of one job: where its outputs go in the job's output, and the ids it is fed."""

    job: _Job
    run: Run
    encoded: list[Encoded]  # the run's feed rows (``run.feed``)

    @property
    def rows(self) -> list[int]:
        return self.run.rows


class EncoderPool:
    """``workers`` threads running ``model``'s encoder calls for every request of one service."""

    def __init__(self, model: ModelDirectory, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"an encoder pool needs at least 1 worker, got {workers}")
        self.model = model
        self.workers = workers
        self._queue: deque[_Batch] = deque()
        self._ready = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.calls = 0  # encoder calls run (a merged call counts once)
        self.rows = 0  # questions those calls encoded
        self.merged = 0  # calls that held batches of more than one request
        self.pace_s: float | None = None  # moving average of a call's seconds per fed row (None: no call yet)
        self._running_rows = 0  # fed rows of the calls running now

    def predicted_s(self, rows: int) -> float | None:
        """Seconds until ``rows`` more rows handed to the pool now would be encoded: the backlog and
        them at the recent pace, spread over the workers (None before the first call has been timed)."""
        with self._ready:
            if self.pace_s is None:
                return None
            backlog = self._running_rows + sum(len(batch.encoded) for batch in self._queue)
            return (backlog + rows) * self.pace_s / self.workers

    def vectors(self, encoded: Sequence[Encoded], check: Callable[[], None] | None = None,
                late: Callable[[float], None] | None = None) -> np.ndarray:
        """Neural vectors [N, D] float32 of ``encoded``, as ``ModelDirectory.vectors_from_ids`` gives them.

        Blocks until every batch has run; re-raises the first error of any of them (or of ``check``,
        called before each batch: what it raises stops the request's batches not run yet). ``late`` is
        called before each batch too, with the seconds until the request's last batch would be done at
        the pool's pace now (:meth:`_finish_s`): a pace that rose since the request was admitted stops
        it there, before more is computed for an answer that would come too late.
        """
        out = np.zeros((len(encoded), self.model.dimension), dtype=np.float32)
        runs = self.model.runs(encoded)
        if not runs:
            return out
        job = _Job(out, len(runs), check=check, late=late)
        with self._ready:
            if self._closed:
                raise RuntimeError("the encoder pool is closed")
            self._start()
            self._queue.extend(_Batch(job, run, [encoded[i] for i in run.feed]) for run in runs)
            self._ready.notify(len(runs))
        job.done.wait()
        if job.error is not None:
            raise job.error
        return out

    def _start(self) -> None:
        """Start the workers on first use (a service that never encodes holds no threads)."""
        while len(self._threads) < self.workers:
            thread = threading.Thread(target=self._work, name=f"esrerank-encoder-{len(self._threads)}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()

    def _take(self) -> list[_Batch] | None:
        """The next batch and those queued behind it that fit in one call with it (None: closed)."""
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if not self._queue:
                return None
            taken = [self._queue.popleft()]
            rows = len(taken[0].encoded)
            schedule = self.model.schedule
            while (self._queue and rows + len(self._queue[0].encoded) <= self.model.batch_size
                   and taken[0].run.joins(self._queue[0].run, schedule)):
                taken.append(self._queue.popleft())
                rows += len(taken[-1].encoded)
            return taken

    def _finish_s(self, job: _Job, taken: list[_Batch]) -> float | None:
        """Seconds until ``job``'s last batch would be done if ``taken`` ran now: the rows running, those
        taken and those queued up to the job's last batch, at the recent pace over the workers."""
        with self._ready:
            if self.pace_s is None:
                return None
            rows = self._running_rows + sum(len(batch.encoded) for batch in taken)
            ahead = queued = 0
            for batch in self._queue:
                queued += len(batch.encoded)
                if batch.job is job:
                    ahead = queued
            return (rows + ahead) * self.pace_s / self.workers

    def _runnable(self, taken: list[_Batch]) -> list[_Batch]:
        """``taken`` without the batches of requests that failed or whose check raises (those finish)."""
        kept = []
        for batch in taken:
            job = batch.job
            if job.error is None and (job.check is not None or job.late is not None):
                try:
                    if job.check is not None:
                        job.check()
                    finish_s = self._finish_s(job, taken) if job.late is not None else None
                    if finish_s is not None:
                        job.late(finish_s)  # type: ignore[misc]
                except BaseException as exc:  # handed to the request that waits on it
                    job.error = exc
            if job.error is None:
                kept.append(batch)
                continue
            with self._ready:
                job.skipped += 1
                job.left -= 1
                finished = job.left == 0
            if finished:
                job.done.set()
        return kept

    def _work(self) -> None:
        while (taken := self._take()) is not None:
            taken = self._runnable(taken)
            if not taken:
                continue
            error: BaseException | None = None
            fed = [e for batch in taken for e in batch.encoded]
            with self._ready:
                self._running_rows += len(fed)
            started = time.perf_counter()
            try:
                vectors = self.model.run_feed(fed)
            except BaseException as exc:  # handed to the requests that wait on it, never lost
                error = exc
            with self._ready:
                self._running_rows -= len(fed)
                if error is None:
                    pace = (time.perf_counter() - started) / len(fed)
                    last = pace if self.pace_s is None else self.pace_s
                    self.pace_s = PACE_WEIGHT * pace + (1 - PACE_WEIGHT) * last
                self.calls += 1
                self.rows += sum(len(batch.rows) for batch in taken)
                self.merged += len({id(batch.job) for batch in taken}) > 1
            start = 0
            for batch in taken:
                job = batch.job
                if error is not None:
                    job.error = job.error or error
                else:
                    job.out[batch.rows] = vectors[start : start + len(batch.rows)]
                start += len(batch.encoded)
                with self._ready:
                    job.left -= 1
                    finished = job.left == 0
                if finished:
                    job.done.set()

    def close(self) -> None:
        """Stop the workers once the queued batches have run; later calls raise RuntimeError."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join(timeout=5)


__all__ = ["EncoderPool"]
