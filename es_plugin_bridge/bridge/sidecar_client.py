"""The product's one HTTP client of the sidecar, on one pool of connections: ``/v1/rerank`` for mode
bridge (a down or slow sidecar is ``SidecarUnavailable``: the caller falls back to the first-stage
order; a request the sidecar refuses is a ``UserError``: a wrong token or a model without β for the
first stage is a configuration mistake to report, not an outage to hide), and ``/v1/encode``,
``/readyz`` and the token check for every mode that embeds the query, ``es index``, ``es setup`` and
``es evaluate`` (:meth:`SidecarClient.embed`, :meth:`~SidecarClient.ready`,
:meth:`~SidecarClient.check_token`). Indexing must not lose documents silently, so there an unreachable
sidecar or a refused batch is an :class:`EmbedError` with the reason; the bulk indexer counts every id of
a batch the sidecar did not answer as failed (and says why), and a batch it refused
(:attr:`EmbedError.refused_a_text`) is split until the texts it refuses fail alone.

``timeout`` bounds the whole call — resolving, connecting, sending, and every byte of the answer — not
each socket read: a sidecar trickling one byte a second would otherwise hold a search for as long as it
likes. The call runs on its own thread and the caller stops waiting at the deadline, whatever the server
does (keep-alive or close, HTTP/1.0 or 1.1, chunked, trickled headers or body); the deadline then shuts
down the call's socket so the thread ends too. The socket is the call's own reference: ``http.client``
sets the connection's ``sock`` to None once an answer will close the connection (HTTP/1.0, ``Connection:
close``), so a watchdog that looked there found nothing to shut down. A truncated or unreadable answer
is an outage too.
Connections persist between calls (``connection_pool``): a call reuses an idle one, so a busy sidecar's
accept queue is not in the way of every search; one the server closed while idle is retried once on a
new connection. A TLS handshake that fails (an ``https://`` URL for a plain-HTTP sidecar) says so and
names ``http://``. A plain-HTTP call hung up on without an answer names ``https://`` only when the
evidence is TLS (the answer's bytes are a TLS record, or a TLS handshake to the same address then
succeeds); otherwise it says the sidecar closed the connection, as one at ``--max-connections`` or
restarting does (issue 48, item 10). A 503 or 429 with ``Retry-After`` is the sidecar's bounded queue:
"busy (queue full)". Each call sends its deadline (``request_deadline.HEADER``: the timeout less a
margin), so the sidecar drops the work of a call this client has stopped waiting for.
Documents the sidecar would not score (blank, or over its length: the server's own rule,
``text.sidecar_text.unscored_candidate``; a blank title with a body is scored, as when an engine sends
it) are left out of the request and ranked last, so one bad corpus entry does not cost the whole window
its reranking. Proxy variables are not consulted (the sidecar is a neighbour of its caller).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import ssl
import threading
import urllib.parse
from collections.abc import Sequence
from typing import Any

from es_plugin_bridge.bridge.connection_pool import ConnectionPool, SidecarConnection
from es_plugin_bridge.bridge.sidecar_target import DEFAULT_TIMEOUT, SidecarTarget, untrusted_certificate
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.request_deadline import HEADER, header_value
from es_plugin_bridge.text.sidecar_text import rerank_text, sidecar_refusal, unscored_candidate

log = logging.getLogger(__name__)


class SidecarUnavailable(Exception):
    """The sidecar did not answer usefully in time (connection refused, timeout, 5xx, bad body)."""


class EmbedError(Exception):
    """The sidecar could not embed a batch (down, slow, or refused it): the batch is not indexed.

    ``status``: the sidecar's HTTP status when it answered, None when it did not."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def refused_a_text(self) -> bool:
        """The sidecar refused what it was sent (400, 413 or 422: e.g. a text over its length limit), not
        the caller (401/403) and not for being down: a smaller batch without that text would pass."""
        return self.status in (400, 413, 422)


#: Seconds past the deadline that an abandoned call's socket operations may still take.
_THREAD_GRACE_S = 1.0
#: What a reused connection that the server closed while it was idle fails with, before any answer:
#: the call is tried once more on a new connection (a rerank changes nothing on the sidecar).
_STALE = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError, ssl.SSLEOFError)


class _Call:
    """One request, run on a worker thread: the caller waits on ``done`` for as long as its deadline allows
    and then calls :meth:`abort`, which shuts down the socket this call holds (its own reference)."""

    def __init__(self, pool: ConnectionPool, url: str, path: str, data: bytes | None,
                 headers: dict[str, str], method: str = "POST") -> None:
        self.pool, self.url, self.path, self.data, self.headers = pool, url, path, data, headers
        self.method = method
        self.done = threading.Event()
        self.answer: tuple[int, bytes] | None = None
        self.retry_after: str | None = None  # the answer's Retry-After header
        self.error: SidecarUnavailable | UserError | None = None
        self._conn: SidecarConnection | None = None  # the connection in use: its step is the call's
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._aborted = self._finished = False

    @property
    def step(self) -> str:
        """What the call is doing now: "connect", "tls" (the handshake) or "http"."""
        return self._conn.step if self._conn is not None else "connect"

    def _hold(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self._aborted:  # the deadline passed while connecting: go no further
                raise SidecarUnavailable("the call was abandoned at its deadline")

    def run(self) -> None:
        try:
            conn, reused = self.pool.take()
            try:
                self._exchange(conn, reused)
            except _STALE:
                if not reused:
                    raise
                self._exchange(self.pool.fresh(), False)  # the server closed it while idle: once more
        except (SidecarUnavailable, UserError) as exc:
            self.error = exc
        except http.client.IncompleteRead as exc:
            self.error = SidecarUnavailable(f"sidecar answer truncated ({len(exc.partial)} bytes, "
                                            f"{exc.expected} more expected)")
        except (OSError, http.client.HTTPException) as exc:
            self.error = SidecarUnavailable(_unreadable(self.url, self.step, exc))
        finally:
            self.done.set()

    def _exchange(self, conn: SidecarConnection, reused: bool) -> None:
        """The request and its whole answer on ``conn``; ``conn`` back to the pool if it stays open."""
        keep = False
        self._conn = conn
        try:
            conn.on_socket = self._hold
            if reused:
                self._hold(conn.sock)
            else:
                self._connect(conn)
            conn.request(self.method, self.path, body=self.data, headers=self.headers)
            resp = conn.getresponse()
            try:
                self.answer = (resp.status, resp.read())
                self.retry_after = resp.getheader("Retry-After")
            finally:
                resp.close()
            keep = True
        finally:
            with self._lock:
                self._finished = True
                keep = keep and not self._aborted
            if keep:
                self.pool.give_back(conn)  # http.client left it open only if the server keeps it
            else:
                conn.close()

    def _connect(self, conn: SidecarConnection) -> None:
        """Connect (and shake hands over TLS), telling a failure by the step it happened in."""
        try:
            conn.connect()
        except ssl.SSLCertVerificationError as exc:  # a configuration mistake, not an outage
            raise UserError(untrusted_certificate(exc)) from None
        except OSError as exc:
            if conn.step == "tls":
                raise SidecarUnavailable(tls_mismatch(self.url, str(exc))) from None
            raise SidecarUnavailable(f"sidecar unreachable: {exc}") from None

    def abort(self) -> None:
        """Make the worker's next (or current) socket operation fail, whichever it is in."""
        with self._lock:
            self._aborted = True
            sock = None if self._finished else self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def tls_mismatch(url: str, detail: str) -> str:
    """Why an ``https://`` call failed in its TLS handshake, and the likely fix."""
    plain = "http://" + url.removeprefix("https://")
    return (f"TLS handshake with {url} failed ({detail}): the sidecar there speaks plain HTTP? "
            f"use {plain}")


#: Seconds a TLS probe (after a plain-HTTP call was hung up on) may take.
_PROBE_S = 1.0


def speaks_tls(url: str, timeout: float = _PROBE_S) -> bool:
    """Whether a TLS handshake with ``url``'s host and port completes (any certificate: only the
    protocol is asked). A plain-HTTP sidecar answers a ClientHello with an HTTP 400 at once."""
    parts = urllib.parse.urlsplit(url)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((parts.hostname or "", parts.port or 80), timeout=timeout) as raw, \
                context.wrap_socket(raw, server_hostname=parts.hostname):
            return True
    except (OSError, ValueError):  # ssl.SSLError is an OSError
        return False


def _unreadable(url: str, step: str, exc: BaseException, probe: bool = True) -> str:
    """Why an answer could not be read. An ``http://`` sidecar that hangs up without an HTTP answer is
    told apart: a TLS server (its bytes a TLS record, 0x15 or 0x16 then version 3; or, when it only
    reset or closed, a TLS handshake with it succeeding: Python's ``ssl`` server resets a plain request)
    gets the ``https://`` fix; any other sidecar closed the connection (at its connection limit, or
    restarting: a plain-HTTP sidecar at ``--max-connections`` is not a TLS problem)."""
    if url.startswith("http://") and step == "http":
        line = getattr(exc, "line", "") or ""
        tls = "https://" + url.removeprefix("http://")
        if line[:2] in ("\x15\x03", "\x16\x03"):
            return (f"the sidecar at {url} answered in TLS, not HTTP ({exc!r}): it speaks TLS; use {tls}")
        hung_up = isinstance(exc, ConnectionResetError | http.client.RemoteDisconnected) or (
            isinstance(exc, http.client.BadStatusLine) and not line)
        if hung_up:
            if probe and speaks_tls(url):
                return (f"the sidecar at {url} closed the connection without an HTTP answer ({exc!r}) and "
                        f"answers a TLS handshake: it speaks TLS; use {tls}")
            return (f"the sidecar at {url} closed the connection without an HTTP answer ({exc!r}): likely at "
                    "its connection limit (esrerank serve --max-connections) or restarting")
    return f"sidecar answer unreadable: {exc!r}"


class SidecarClient:
    def __init__(self, url: str, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 ca_certs: str | None = None) -> None:
        target = SidecarTarget(url, token, timeout, ca_certs)  # the one set of checks (URL, host, ..., CA)
        self.url, self.token, self.timeout = target.url, token, timeout
        parts = urllib.parse.urlsplit(self.url)
        tls = target.ssl_context()
        host, port = parts.hostname or "", parts.port or (443 if tls is not None else 80)
        self._prefix = parts.path
        # The socket's own timeout (longer than the deadline, so the deadline is always what the caller
        # sees) only ends an abandoned call's thread where abort() has no socket yet: still resolving.
        self.pool = ConnectionPool(lambda: SidecarConnection(host, port, timeout + _THREAD_GRACE_S, tls))

    @classmethod
    def reaching(cls, target: SidecarTarget, timeout: float | None = None) -> SidecarClient:
        """The client of a :class:`SidecarTarget` (the command line's one value for the sidecar);
        ``timeout`` overrides the target's (bulk embedding waits longer than a search)."""
        return cls(target.url, token=target.token, timeout=target.timeout if timeout is None else timeout,
                   ca_certs=target.ca_certs)

    def close(self) -> None:
        """Close the idle connections kept for the next calls."""
        self.pool.close()

    def _exchange(self, method: str, path: str, body: dict | None) -> tuple[int, bytes, str | None]:
        """(status, body, Retry-After) of one request, all of it within ``timeout`` seconds
        (SidecarUnavailable else)."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", HEADER: header_value(self.timeout)}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        call = _Call(self.pool, self.url, self._prefix + path, data, headers, method)
        worker = threading.Thread(target=call.run, name="sidecar-call", daemon=True)
        worker.start()
        if not call.done.wait(self.timeout):
            call.abort()
            if call.step == "tls":
                raise SidecarUnavailable(tls_mismatch(self.url, f"no answer in {self.timeout} s"))
            raise SidecarUnavailable(f"sidecar timed out after {self.timeout} s")
        if call.error is not None:
            raise call.error
        assert call.answer is not None
        return (*call.answer, call.retry_after)

    def _post(self, path: str, body: dict) -> tuple[int, bytes]:
        """(status, body) of one POST of a search (SidecarUnavailable when busy, timed out or down)."""
        status, payload, retry_after = self._exchange("POST", path, body)
        if status in (429, 503) and retry_after is not None:
            why = "predicted past the deadline" if b"past its deadline" in payload else "queue full"
            raise SidecarUnavailable(f"the sidecar is busy ({why}): it answered {status}, retry after "
                                     f"{retry_after[:20]} s")
        if status == 504:  # serving.deadline (the request's deadline passed: not computed) or a gateway's
            detail = payload.decode("utf-8", "replace")[:300]
            raise SidecarUnavailable(f"sidecar timed out: it answered 504: {detail}")
        return status, payload

    def _read(self, method: str, path: str, body: dict | None = None) -> Any:
        """The JSON answer of one indexing-side call; EmbedError with the status when the sidecar
        refuses, without one when it does not answer (an untrusted certificate stays a UserError)."""
        try:
            status, payload, _ = self._exchange(method, path, body)
        except SidecarUnavailable as exc:
            raise EmbedError(f"sidecar at {self.url} did not answer {path}: {exc}") from None
        if status >= 300:
            detail = payload.decode("utf-8", "replace")[:300]
            raise EmbedError(f"sidecar answered {status} to {path}: {detail}", status)
        try:
            return json.loads(payload)
        except ValueError as exc:
            raise EmbedError(f"sidecar at {self.url} did not answer {path}: {exc}") from None

    def ready(self) -> dict[str, Any]:
        """``GET /readyz`` (model name, type, dimension, fusion stages); UserError when it does not answer."""
        try:
            return self._read("GET", "/readyz")  # type: ignore[no-any-return]
        except EmbedError as exc:
            raise UserError(f"{exc} (start it with `esrerank serve MODEL_DIR`)") from None

    def check_token(self, *, pairwise: bool = False) -> None:
        """One tiny authenticated call, so a wrong token fails setup instead of every batch.

        ``pairwise``: the model has no vector per text and the sidecar refuses ``/v1/encode``, so the
        call is a one-document ``/v1/rerank`` (what Elasticsearch will call in mode native)."""
        check = Question("token-check", "token check", "")
        try:
            if not pairwise:
                self.embed([check])
                return
            text = rerank_text(check)
            answer = self._read("POST", "/v1/rerank", {"query": text, "documents": [text]})
            results = answer.get("results") if isinstance(answer, dict) else None
            if not isinstance(results, list) or len(results) != 1:
                count = len(results) if isinstance(results, list) else 0
                raise EmbedError(f"sidecar answered {count} results to /v1/rerank for one document")
        except EmbedError as exc:
            raise UserError(str(exc)) from None

    def embed(self, questions: Sequence[Question]) -> list[dict[str, Any]]:
        """One ``{"vector": [...], "terms": {token: weight}}`` per question, in order (``/v1/encode``)."""
        # As the strings Elasticsearch itself sends (mode native): a question with an empty title
        # still embeds, and both paths see the same text.
        answer = self._read("POST", "/v1/encode", {"texts": [rerank_text(q) for q in questions]})
        embeddings = answer.get("embeddings") if isinstance(answer, dict) else None
        if not isinstance(embeddings, list) or len(embeddings) != len(questions):
            raise EmbedError(
                f"sidecar answered {len(embeddings or [])} embeddings for {len(questions)} texts"
            )
        return embeddings

    def rerank(
        self,
        query: Question,
        documents: Sequence[Question],
        first_stage_scores: Sequence[float] | None = None,
        first_stage: str | None = None,
    ) -> list[tuple[int, float]]:
        """(document index, relevance_score) for every document, best first.

        Documents the sidecar would give the lowest score unscored (every part blank, or a part over its
        length: ``text.sidecar_text.unscored_candidate``) are not sent and come last, in their given order,
        with score 0.0; a document with a blank title and a body is sent and scored, as the server scores
        it when an engine sends it (modes native, rerank). A query with a blank title cannot be reranked
        at all (SidecarUnavailable): the server refuses a query whose title part is blank.
        """
        if not query.title.strip():
            raise SidecarUnavailable("the query has no title; the sidecar cannot score it")
        refusal = sidecar_refusal(query)  # what the sidecar would refuse is not sent (text.sidecar_text)
        if refusal is not None:
            raise SidecarUnavailable(f"the sidecar cannot score the query: {refusal}")
        sent = [i for i, d in enumerate(documents) if unscored_candidate(d) is None]
        left_out = sorted(set(range(len(documents))) - set(sent))
        if left_out:
            log.info("%d of %d documents are blank or too long for the sidecar; ranked last", len(left_out),
                     len(documents))
        if not sent:
            raise SidecarUnavailable("no document holds text the sidecar scores; nothing for it to rerank")
        body: dict = {
            "query": {"id": query.id, "title": query.title, "body": query.body},
            "documents": [{"id": documents[i].id, "title": documents[i].title, "body": documents[i].body}
                          for i in sent],
        }
        if first_stage_scores is not None:
            body["first_stage_scores"] = [float(first_stage_scores[i]) for i in sent]
            body["first_stage"] = first_stage
        status, payload = self._post("/v1/rerank", body)
        if status >= 500:
            detail = payload.decode("utf-8", "replace")[:300]
            raise SidecarUnavailable(f"sidecar answered {status}: {detail}")
        if status >= 300:
            detail = payload.decode("utf-8", "replace")[:300]
            raise UserError(f"sidecar refused the request ({status}): {detail}")
        try:
            answer = json.loads(payload)
            results = [(int(r["index"]), float(r["relevance_score"])) for r in answer["results"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise SidecarUnavailable(f"sidecar answer lacks results[].index/relevance_score: {exc}") from None
        if sorted(i for i, _ in results) != list(range(len(sent))):
            raise SidecarUnavailable("sidecar answer does not score every document exactly once")
        return [(sent[i], score) for i, score in results] + [(i, 0.0) for i in left_out]
