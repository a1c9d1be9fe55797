"""Bulk-index questions into Elasticsearch in batches, with back-off, resume and exact failure accounting.

Every item read ends up in exactly one of ``indexed``, ``skipped`` (resume: already in the index) or
``failed`` (with its id, status and reason), so nothing is lost silently. Documents carry explicit
``_id``s and use the ``index`` op type, so a retry or a re-run overwrites instead of duplicating.

Why a retry loop of our own rather than ``elasticsearch.helpers.streaming_bulk``
(``elasticsearch/helpers/actions.py``, 9.5.1): with ``raise_on_exception=False`` it turns a
whole-request ``ApiError`` into per-item failures and retries ``retry_on_status`` per item, but a
``TransportError`` (connection refused or reset, timeout) still escapes it mid-stream, and it pairs
actions with response items by ``zip``, so a response with fewer items than actions would drop ids
without a word. This loop reuses the helpers' ``expand_action`` (the same action format) and
back-off formula, ``min(max_backoff, initial_backoff * 2 ** (retry - 1))``, and turns the
transport's own immediate retries off for its requests so that the back-off and counts are ours alone.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter
from typing import Any, Generic, NamedTuple, TypeVar

from elastic_transport import TransportError
from elasticsearch import ApiError, Elasticsearch
from elasticsearch.helpers import expand_action
from opensearchpy.exceptions import TransportError as OpenSearchError
from tqdm import tqdm

from es_plugin_bridge.elastic.read_ahead import read_ahead
from es_plugin_bridge.errors import UserError

Q = TypeVar("Q")
T = TypeVar("T")

MAX_REASON_CHARS = 300
#: Failures with one status and reason printed one by one; the rest are one line ("N more like this").
SAME_SHOWN = 3
#: Pauses before resending a request that reached no node (refused, reset): a node that is gone does not
#: come back within the minutes of 429/5xx back-off, and a cluster's other nodes are tried at once by the
#: transport; past these the run stops (``es index`` stopped 99 s after its only node died, 5 retries
#: with back-off for each of 3 batches).
UNREACHABLE_PAUSES_S = (0.5, 1.0, 2.0)
#: What a request can raise, from either engine's client (OpenSearch's: elastic/cluster/opensearch_client.py).
REQUEST_ERRORS = (ApiError, TransportError, OpenSearchError)


class Failure(NamedTuple):
    """One item that did not get indexed, as ``(id, status, reason)``. ``status`` is None when no HTTP
    status applies (the batch's ``prepare`` raised, or the cluster could not be reached)."""

    id: str
    status: int | None
    reason: str


@dataclass(slots=True)
class BulkReport:
    """What one indexing run did; ``read == indexed + skipped + failed`` always holds."""

    read: int = 0
    indexed: int = 0
    skipped: int = 0
    failed: int = 0
    failures: list[Failure] = field(default_factory=list)
    retries: int = 0  # item sends beyond the first (429/5xx/transport errors), for information
    aborted: str | None = None  # why the run stopped before reading every item, or None
    interrupted: bool = False  # the run was stopped by Ctrl-C (``aborted`` says where)

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.aborted is None

    def lines(self) -> list[str]:
        """The report as the CLI prints it: counts, then every failed id with status and reason."""
        out = [f"read {self.read}  indexed {self.indexed}  skipped {self.skipped}  failed {self.failed}"
               + (f"  (retried sends: {self.retries})" if self.retries else "")]
        out += _summarised(self.failures)
        if self.aborted:
            out.append(f"stopped early: {self.aborted}")
        return out

    def _fail(self, ids: Iterable[str], status: int | None, reason: str) -> None:
        for id_ in ids:
            self.failures.append(Failure(id_, status, reason))
            self.failed += 1


def _summarised(failures: list[Failure]) -> list[str]:
    """``failed ID: STATUS REASON`` of each failure, but of those sharing a status and reason only the
    first :data:`SAME_SHOWN`, then one line per such reason: ``N more like this: STATUS REASON``."""
    out: list[str] = []
    seen: dict[tuple[int | None, str], int] = {}
    for f in failures:
        key = (f.status, f.reason)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= SAME_SHOWN:
            out.append(f"failed {f.id}: {'-' if f.status is None else f.status} {f.reason}")
    for (status, reason), count in seen.items():
        if count > SAME_SHOWN:
            out.append(f"{count - SAME_SHOWN} more like this: {'-' if status is None else status} {reason}")
    return out


def index_questions(
    client: Elasticsearch,
    index: str,
    items: Iterable[Q],
    prepare: Callable[[list[Q]], list[dict[str, Any]]],
    *,
    batch_size: int = 256,
    resume: bool = False,
    max_retries: int = 5,
    initial_backoff: float = 1.0,
    max_backoff: float = 60.0,
    abort_after_failed_batches: int = 3,
    progress: bool = True,
    id_of: Callable[[Q], str] = attrgetter("id"),
    stop_on: Callable[[int | None, str], str | None] | None = None,
    batch_refused: Callable[[Exception], bool] | None = None,
    item_refused: Callable[[int | None, str], bool] | None = None,
    ahead: int = 1,
    refusal: Callable[[Q], str | None] | None = None,
) -> BulkReport:
    """Index ``items`` into ``index`` in batches of ``batch_size`` and return the report.

    ``prepare(batch)`` returns one bulk action per item, in order, in the format of
    ``elasticsearch.helpers`` (a dict of fields, or ``{"_source": {...}}``, optionally ``_op_type``);
    ``_id`` is set to ``id_of(item)`` and ``_index`` to ``index`` when absent (a different ``_id`` is a
    programming error: ValueError). If ``prepare`` raises (e.g. the sidecar is down), every id of that
    batch is a failure with the exception as reason, and the run goes on with the next batch; after
    ``abort_after_failed_batches`` consecutive batches in which nothing got indexed (0 = never), the run
    stops and ``report.aborted`` says why, so a dead sidecar or cluster ends the run quickly instead of
    listing every id of the data set. Re-running with ``resume=True`` then picks up where it stopped.

    Per item, 429 and 5xx answers are retried, as are whole-request 429/5xx answers and transport
    errors, up to ``max_retries`` times per batch with exponential back-off; any other 4xx (e.g.
    ``mapper_parsing_exception``) fails the item at once. With ``resume=True`` each batch's ids are
    first looked up with one real-time ``mget`` (``_source: false``) and those found are skipped
    without calling ``prepare``. Raises UserError when ``index`` does not exist or cannot be checked
    (bulk would create it with dynamic mappings). Searches see the documents after the index's next
    refresh (1 s by default): call ``client.indices.refresh(index=...)`` to see them at once.

    ``stop_on(status, reason)`` of a failed item: why the whole run must stop at once, or None. Such an
    item is not resent, and the run ends after its batch (an ingest pipeline's embedder that cannot be
    reached fails every further batch the same way, after the same wait).

    One bad item must fail alone, not its batch. ``refusal(item)``: why ``prepare`` would refuse the
    item (the sidecar's rule, ``text.sidecar_text.sidecar_refusal``), or None; such an item fails alone,
    named, before ``prepare`` sees the batch, so the rest costs one call instead of a bisection.
    ``batch_refused(exc)``: ``prepare`` raised because of
    some of the batch's items (the sidecar refused a text): the batch is split in halves, each prepared
    again, until the items it refuses fail alone with that reason and the rest are sent.
    ``item_refused(status, reason)``: a failed bulk item may have failed for a neighbour (an ingest
    processor embeds a bulk's documents in one call): those items are resent in halves the same way.

    Ctrl-C ends the run with the report so far: the items of the batch in flight whose answer had not
    come are failures ("interrupted"; one may be stored, which ``resume`` finds), ``report.interrupted``.

    ``ahead``: batches prepared (resume check and ``prepare``, i.e. embedding) in a worker thread while the
    cluster stores the one before (``read_ahead.py``), so a run goes at the pace of the slower of the two
    instead of their sum; 0 prepares and sends each batch in turn. A batch counts as read when it is
    booked, so one prepared but never sent (the run stopped) is neither read nor lost: resume sends it.
    """
    if batch_size < 1 or max_retries < 0:
        raise ValueError("batch_size must be >= 1 and max_retries >= 0")
    es = client.options(max_retries=0, retry_on_status=())
    _require_index(es, index)
    run = _Run(es, index, prepare, id_of, _Retry(max_retries, initial_backoff, max_backoff),
               _Rules(stop_on, batch_refused, item_refused, refusal))
    with tqdm(total=len(items) if isinstance(items, Sized) else None, desc=f"indexing {index}",
              unit="question", file=sys.stderr, dynamic_ncols=True, mininterval=0.2,
              disable=None if progress else True) as bar:
        staged = (run.stage(batch, resume) for batch in _batches(items, batch_size))
        try:
            if ahead < 1:
                _run_batches(run, staged, bar, abort_after_failed_batches)
            else:
                with read_ahead(staged, ahead) as prepared:
                    _run_batches(run, prepared, bar, abort_after_failed_batches)
        except KeyboardInterrupt:
            run.interrupt()
    return run.report


def _run_batches(run: _Run[Q], batches: Iterable[_Staged], bar: tqdm,
                 abort_after_failed_batches: int) -> None:
    """Each prepared batch in turn, until the end or a reason to stop (``report.aborted``)."""
    report = run.report
    failed_in_a_row = 0  # consecutive batches with nothing indexed and something failed
    for batch in batches:
        indexed, failed = report.indexed, report.failed
        run.book(batch)
        bar.update(len(batch.ids))
        bar.set_postfix(indexed=report.indexed, skipped=report.skipped, failed=report.failed,
                        refresh=False)
        if run.stop is not None:
            report.aborted = (f"{run.stop}; stopped after {batch.ids[-1]}, reading nothing further; "
                              "re-run with resume to continue")
            break
        if report.indexed > indexed:
            failed_in_a_row = 0
        elif report.failed > failed:
            failed_in_a_row += 1
            if abort_after_failed_batches and failed_in_a_row >= abort_after_failed_batches:
                report.aborted = (
                    f"{failed_in_a_row} batches in a row failed (last: {report.failures[-1].reason}); "
                    f"stopped after {batch.ids[-1]}, reading nothing further; "
                    "re-run with resume to continue")
                break


class _Retry:
    """How often and how long to wait before resending: ``streaming_bulk``'s formula."""

    def __init__(self, max_retries: int, initial_backoff: float, max_backoff: float) -> None:
        self.max_retries, self.initial, self.cap = max_retries, initial_backoff, max_backoff

    def wait(self, retry: int, unreachable: int = 0) -> None:
        """The back-off before resend ``retry``; after ``unreachable`` sends in a row reached no node,
        the short :data:`UNREACHABLE_PAUSES_S` pause instead."""
        if unreachable:
            time.sleep(UNREACHABLE_PAUSES_S[min(unreachable, len(UNREACHABLE_PAUSES_S)) - 1])
            return
        time.sleep(min(self.cap, self.initial * 2 ** (retry - 1)))

    def call(self, fn: Callable[..., Any], **kwargs: Any) -> tuple[Any, int | None, str]:
        """Call ``fn``, resending on retryable whole-request errors: (response or None, status, reason)."""
        unreachable = 0
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.wait(attempt, unreachable)
            try:
                return fn(**kwargs), 200, ""
            except REQUEST_ERRORS as exc:
                status, reason = _status_of(exc), _reason_of_exception(exc)
                unreachable = unreachable + 1 if _unreachable(exc) else 0
            if not _retryable(status) or unreachable > len(UNREACHABLE_PAUSES_S):
                break
        return None, status, reason


_Pending = tuple[str, dict[str, Any], Any]  # (id, action line, source line or None)
_Suspect = tuple[_Pending, int | None, str]  # an item refused maybe for a neighbour: (item, status, reason)


class _Staged(NamedTuple):
    """One batch made ready to send (in the read-ahead thread): its ids, those resume found stored, those
    that failed before sending (with status and reason), and the bulk lines of the rest."""

    ids: list[str]
    skipped: list[str]
    failures: list[tuple[list[str], int | None, str]]
    pending: list[_Pending]
    interrupted: BaseException | None = None  # Ctrl-C came while it was prepared: booked as read, raised


class _Rules(NamedTuple):
    """``index_questions``' rules for failures (see there): stop the run, split a refused batch."""

    stop_on: Callable[[int | None, str], str | None] | None = None
    batch_refused: Callable[[Exception], bool] | None = None
    item_refused: Callable[[int | None, str], bool] | None = None
    refusal: Callable[[Any], str | None] | None = None


class _Run(Generic[Q]):
    """One indexing run: books every item of every batch into its report."""

    def __init__(self, es: Elasticsearch, index: str, prepare: Callable[[list[Q]], list[dict[str, Any]]],
                 id_of: Callable[[Q], str], retry: _Retry, rules: _Rules | None = None) -> None:
        self.es, self.index, self.prepare, self.id_of, self.retry = es, index, prepare, id_of, retry
        self.rules = rules or _Rules()
        self.stop: str | None = None  # why the run stops after this batch (``stop_on``), or None
        self.report = BulkReport()
        self.open: dict[str, None] = {}  # the ids of the batch at hand not booked yet, in order

    def stage(self, batch: list[Q], resume: bool) -> _Staged:
        """The resume check and the bulk lines of ``batch``; books nothing (it may run in another thread)."""
        all_ids = ids = [str(self.id_of(item)) for item in batch]
        failures: list[tuple[list[str], int | None, str]] = []
        skipped: list[str] = []
        if resume:
            resp, status, reason = self.retry.call(self.es.mget, index=self.index, ids=ids, source=False)
            if resp is None:
                return _Staged(all_ids, [], [(ids, status, f"resume check (mget) failed: {reason}")], [])
            # mget is real time: it also finds documents indexed but not yet refreshed, which a
            # terms query on _id would miss right after an interrupted run.
            present = {doc["_id"] for doc in resp["docs"] if doc.get("found")}
            skipped = [id_ for id_ in ids if id_ in present]
            keep = [n for n, id_ in enumerate(ids) if id_ not in present]
            batch, ids = [batch[n] for n in keep], [ids[n] for n in keep]
        if self.rules.refusal is not None:  # what prepare would refuse fails alone, before it is called
            reasons = [self.rules.refusal(item) for item in batch]
            failures += [([id_], None, f"refused before sending: {why}")
                         for id_, why in zip(ids, reasons, strict=True) if why is not None]
            keep = [n for n, why in enumerate(reasons) if why is None]
            batch, ids = [batch[n] for n in keep], [ids[n] for n in keep]
        try:
            pending = self._prepare(batch, ids, failures)
        except KeyboardInterrupt as exc:  # the batch was being read: booked as in flight (``book``)
            return _Staged(all_ids, [], [], [], exc)
        return _Staged(all_ids, skipped, failures, pending)

    def book(self, staged: _Staged) -> None:
        """Count a staged batch as read, book what failed before sending, and send the rest."""
        self.open = dict.fromkeys(staged.ids)
        self.report.read += len(staged.ids)
        if staged.interrupted is not None:
            raise staged.interrupted
        self.report.skipped += len(staged.skipped)
        for id_ in staged.skipped:
            self.open.pop(id_, None)
        for ids, status, reason in staged.failures:
            self._failed(ids, status, reason)
        if staged.pending:
            self._send(staged.pending)

    def interrupt(self) -> None:
        """Ctrl-C: what was in flight is failed, and the report says the run was stopped."""
        where = next(iter(self.open), None)
        self._failed(list(self.open), None, "interrupted before its answer came (it may be stored: "
                                            "resume checks)")
        self.report.interrupted = True
        self.report.aborted = ("interrupted (Ctrl-C)" + (f" at {where}" if where else "")
                               + ", reading nothing further; re-run with resume to continue")

    def _failed(self, ids: list[str], status: int | None, reason: str) -> None:
        self.report._fail(ids, status, reason)
        for id_ in ids:
            self.open.pop(id_, None)

    def _prepare(self, batch: list[Q], ids: list[str],
                 failures: list[tuple[list[str], int | None, str]]) -> list[_Pending]:
        """The bulk lines of ``batch``; where ``prepare`` refuses some items, each fails alone (added to
        ``failures``)."""
        if not batch:
            return []
        try:
            actions = self.prepare(batch)
        except Exception as exc:  # the batch cannot be prepared: every id fails, with the reason
            refused = self.rules.batch_refused
            if len(batch) > 1 and refused is not None and refused(exc):  # find the items it refuses
                half = len(batch) // 2
                return (self._prepare(batch[:half], ids[:half], failures)
                        + self._prepare(batch[half:], ids[half:], failures))
            failures.append((ids, None, f"prepare failed: {type(exc).__name__}: {_short(str(exc))}"))
            return []
        if len(actions) != len(batch):
            raise ValueError(f"prepare returned {len(actions)} actions for {len(batch)} items")
        return [_expand(action, id_, self.index) for action, id_ in zip(actions, ids, strict=True)]

    def _send(self, pending: list[_Pending]) -> None:
        """Bulk-send ``pending``, resending what is retryable, until done or out of retries; items
        refused maybe for a neighbour (``item_refused``) are resent in halves until they fail alone."""
        suspects: list[_Suspect] = []
        unreachable = 0  # sends in a row that reached no node
        for attempt in range(self.retry.max_retries + 1):
            if attempt:
                self.retry.wait(attempt, unreachable)
                self.report.retries += len(pending)
            last = attempt == self.retry.max_retries
            operations = [line for _, head, source in pending for line in (head, source) if line is not None]
            try:
                items = self.es.bulk(operations=operations, index=self.index)["items"]
            except REQUEST_ERRORS as exc:
                status, reason = _status_of(exc), _reason_of_exception(exc)
                unreachable = unreachable + 1 if _unreachable(exc) else 0
                gone = unreachable > len(UNREACHABLE_PAUSES_S)
                if last or gone or not _retryable(status):
                    self._failed([p[0] for p in pending], status, f"bulk request failed: {reason}")
                    if unreachable:  # no node answered: the next batch would wait the same for nothing
                        self.stop = self.stop or f"no node of the cluster answered ({reason})"
                    break
                continue
            unreachable = 0
            pending = self._book(pending, items, resend=not last, suspects=suspects)
            if not pending:
                break
        if len(suspects) == 1:  # alone: the reason is its own
            (id_, _, _), status, reason = suspects[0]
            self._failed([id_], status, reason)
        elif suspects:
            half = len(suspects) // 2
            self._send([item for item, _, _ in suspects[:half]])
            self._send([item for item, _, _ in suspects[half:]])

    def _book(self, pending: list[_Pending], items: list[dict[str, Any]], resend: bool,
              suspects: list[_Suspect]) -> list[_Pending]:
        """Book each response item against the action it answers (same position); return those to resend
        (and add to ``suspects`` those refused maybe for a neighbour)."""
        again = []
        for n, action in enumerate(pending):
            id_ = action[0]
            if n >= len(items):
                self._failed([id_], None, f"no answer for this action in the bulk response "
                                          f"({len(items)} items for {len(pending)} actions)")
                continue
            ((_, result),) = items[n].items()
            status = int(result.get("status", 500))
            if str(result.get("_id")) != id_:
                self._failed([id_], status, f"bulk response item {n} is for id {result.get('_id')!r}")
            elif 200 <= status < 300:
                self.report.indexed += 1
                self.open.pop(id_, None)
            else:
                reason = _reason_of_error(result.get("error"))
                stop = self.rules.stop_on(status, reason) if self.rules.stop_on is not None else None
                if stop is not None:
                    self.stop = self.stop or stop
                if stop is None and self._refused(status, reason):
                    suspects.append((action, status, reason))
                elif resend and stop is None and _retryable(status):
                    again.append(action)
                else:
                    self._failed([id_], status, reason)
        return again

    def _refused(self, status: int, reason: str) -> bool:
        return self.rules.item_refused is not None and self.rules.item_refused(status, reason)


def _retryable(status: int | None) -> bool:
    """429 (a full queue) and 5xx are worth resending, but not 501/505 (the server cannot do it at all);
    None is a transport error (no answer)."""
    return status is None or status == 429 or (status >= 500 and status not in (501, 505))


def _unreachable(exc: Exception) -> bool:
    """The request reached no node (refused, reset; not a timeout, which a slow node gives)."""
    from elastic_transport import ConnectionError as NoConnection
    from elastic_transport import ConnectionTimeout
    from opensearchpy.exceptions import ConnectionError as NoOpenSearchConnection
    from opensearchpy.exceptions import ConnectionTimeout as OpenSearchTimeout

    if isinstance(exc, (ConnectionTimeout, OpenSearchTimeout)):
        return False
    return isinstance(exc, (NoConnection, NoOpenSearchConnection))


def _status_of(exc: Exception) -> int | None:
    if isinstance(exc, OpenSearchError):  # its status_code is "N/A" when no answer came
        return exc.status_code if isinstance(exc.status_code, int) else None
    return exc.status_code if isinstance(exc, ApiError) else None


def _batches(items: Iterable[T], size: int) -> Iterator[list[T]]:
    it = iter(items)
    while batch := list(islice(it, size)):
        yield batch


def _require_index(es: Elasticsearch, index: str) -> None:
    try:
        exists = bool(es.indices.exists(index=index))
    except REQUEST_ERRORS as exc:
        raise UserError(f"cannot check index {index!r}: {_reason_of_exception(exc)}") from exc
    if not exists:
        raise UserError(f"index {index!r} does not exist: create it first (esrerank es setup)")


def _expand(action: dict[str, Any], id_: str, index: str) -> _Pending:
    """(id, action line, source line or None) through the helpers' own ``expand_action``."""
    action = dict(action)
    if "_id" in action and str(action["_id"]) != id_:
        raise ValueError(f"prepare gave _id {action['_id']!r} to the item whose id is {id_!r}")
    action["_id"] = id_
    action.setdefault("_index", index)
    header, source = expand_action(action)
    return id_, header, source


def _reason_of_error(error: Any) -> str:
    """``type: reason`` of a bulk item's ``error`` object (Elasticsearch's ErrorCause), shortened."""
    if isinstance(error, dict):
        text = f"{error.get('type', 'error')}: {error.get('reason', '')}"
        cause = error.get("caused_by")
        if isinstance(cause, dict):
            text += f" (caused by {cause.get('type', '')}: {cause.get('reason', '')})"
        return _short(text)
    return _short(str(error)) if error else "unknown error"


def _reason_of_exception(exc: Exception) -> str:
    if isinstance(exc, OpenSearchError) and isinstance(exc.info, dict):
        return _reason_of_error(exc.info.get("error", exc.info))
    if isinstance(exc, ApiError) and isinstance(exc.body, dict):
        return _reason_of_error(exc.body.get("error", exc.body))
    return _short(f"{type(exc).__name__}: {exc}")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"
