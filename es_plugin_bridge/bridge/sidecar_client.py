"""HTTP client of the sidecar's ``/v1/rerank``: a down or slow sidecar is ``SidecarUnavailable`` (the
caller falls back to the first-stage order); a request the sidecar refuses is a ``UserError``
(a wrong token or a model without β for the first stage is a configuration mistake to report,
not an outage to hide).

``timeout`` bounds the whole call — resolving, connecting, sending, and every byte of the answer — not
each socket read: a sidecar trickling one byte a second would otherwise hold a search for as long as it
likes. The call runs on its own thread and the caller stops waiting at the deadline, whatever the server
does (keep-alive or close, HTTP/1.0 or 1.1, chunked, trickled headers or body); the deadline then shuts
down the call's socket so the thread ends too. The socket is the call's own reference: ``http.client``
sets the connection's ``sock`` to None once an answer will close the connection (HTTP/1.0, ``Connection:
close``), so a watchdog that looked there found nothing to shut down. A truncated or unreadable answer
is an outage too.
Documents the sidecar cannot take (a blank title) are left out of the request and ranked last, so one
bad corpus entry does not cost the whole window its reranking. Proxy variables are not consulted (the
sidecar is a neighbour of its caller).
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

from es_plugin_bridge.bridge.sidecar_target import DEFAULT_TIMEOUT, SidecarTarget, untrusted_certificate
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError

log = logging.getLogger(__name__)


class SidecarUnavailable(Exception):
    """The sidecar did not answer usefully in time (connection refused, timeout, 5xx, bad body)."""


#: Seconds past the deadline that an abandoned call's socket operations may still take.
_THREAD_GRACE_S = 1.0


class _Call:
    """One POST, run on a worker thread: the caller waits on ``done`` for as long as its deadline allows
    and then calls :meth:`abort`, which shuts down the socket this call holds (its own reference)."""

    def __init__(self, conn: http.client.HTTPConnection, path: str, data: bytes,
                 headers: dict[str, str]) -> None:
        self.conn, self.path, self.data, self.headers = conn, path, data, headers
        self.done = threading.Event()
        self.answer: tuple[int, bytes] | None = None
        self.error: SidecarUnavailable | UserError | None = None
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._aborted = False

    def run(self) -> None:
        conn, resp = self.conn, None
        try:
            try:
                conn.connect()
            except ssl.SSLCertVerificationError as exc:  # a configuration mistake, not an outage
                raise UserError(untrusted_certificate(exc)) from None
            except OSError as exc:
                raise SidecarUnavailable(f"sidecar unreachable: {exc}") from None
            with self._lock:
                self._sock = conn.sock
                if self._aborted:  # connected after the deadline: send nothing
                    return
            conn.request("POST", self.path, body=self.data, headers=self.headers)
            resp = conn.getresponse()
            self.answer = (resp.status, resp.read())
        except (SidecarUnavailable, UserError) as exc:
            self.error = exc
        except http.client.IncompleteRead as exc:
            self.error = SidecarUnavailable(f"sidecar answer truncated ({len(exc.partial)} bytes, "
                                            f"{exc.expected} more expected)")
        except (OSError, http.client.HTTPException) as exc:
            self.error = SidecarUnavailable(f"sidecar answer unreadable: {exc!r}")
        finally:
            if resp is not None:
                resp.close()
            conn.close()
            self.done.set()

    def abort(self) -> None:
        """Make the worker's next (or current) socket operation fail, whichever it is in."""
        with self._lock:
            self._aborted = True
            sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class SidecarClient:
    def __init__(self, url: str, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 ca_certs: str | None = None) -> None:
        target = SidecarTarget(url, token, timeout, ca_certs)  # the one set of checks (URL, host, ..., CA)
        self.url, self.token, self.timeout = target.url, token, timeout
        parts = urllib.parse.urlsplit(self.url)
        self._tls = target.ssl_context()
        self._host, self._port, self._prefix = parts.hostname, parts.port, parts.path

    @classmethod
    def reaching(cls, target: SidecarTarget) -> SidecarClient:
        """The client of a :class:`SidecarTarget` (the command line's one value for the sidecar)."""
        return cls(target.url, token=target.token, timeout=target.timeout, ca_certs=target.ca_certs)

    def _post(self, path: str, body: dict) -> tuple[int, bytes]:
        """(status, body) of one POST, all of it within ``timeout`` seconds (SidecarUnavailable else)."""
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        # The socket's own timeout (longer than the deadline, so the deadline is always what the caller
        # sees) only ends an abandoned call's thread where abort() has no socket yet: still connecting.
        timeout = self.timeout + _THREAD_GRACE_S
        conn = (http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._tls)
                if self._tls is not None
                else http.client.HTTPConnection(self._host, self._port, timeout=timeout))
        call = _Call(conn, self._prefix + path, data, headers)
        worker = threading.Thread(target=call.run, name="sidecar-call", daemon=True)
        worker.start()
        if not call.done.wait(self.timeout):
            call.abort()
            raise SidecarUnavailable(f"sidecar timed out after {self.timeout} s")
        if call.error is not None:
            raise call.error
        assert call.answer is not None
        return call.answer

    def rerank(
        self,
        query: Question,
        documents: Sequence[Question],
        first_stage_scores: Sequence[float] | None = None,
        first_stage: str | None = None,
    ) -> list[tuple[int, float]]:
        """(document index, relevance_score) for every document, best first.

        Documents with a blank title (which the sidecar refuses) come last, in their given order, with
        score 0.0; a query with a blank title cannot be reranked at all (SidecarUnavailable).
        """
        if not query.title.strip():
            raise SidecarUnavailable("the query has no title; the sidecar cannot score it")
        sent = [i for i, d in enumerate(documents) if d.title.strip()]
        left_out = sorted(set(range(len(documents))) - set(sent))
        if left_out:
            log.info("%d of %d documents have no title; ranked last", len(left_out), len(documents))
        if not sent:
            raise SidecarUnavailable("no document has a title; nothing for the sidecar to rerank")
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
