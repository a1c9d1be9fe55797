"""HTTP client of the sidecar's ``/v1/rerank``: a down or slow sidecar is ``SidecarUnavailable`` (the
caller falls back to the first-stage order); a request the sidecar refuses is a ``UserError``
(a wrong token or a model without β for the first stage is a configuration mistake to report,
not an outage to hide).

``timeout`` bounds the whole call — connecting, sending, and every byte of the answer — not each socket
read: a sidecar trickling one byte a second would otherwise hold a search for as long as it likes. A
watchdog shuts the socket down at the deadline. A truncated or unreadable answer is an outage too.
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
import threading
import urllib.parse
from collections.abc import Sequence

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError

log = logging.getLogger(__name__)


class SidecarUnavailable(Exception):
    """The sidecar did not answer usefully in time (connection refused, timeout, 5xx, bad body)."""


class SidecarClient:
    def __init__(self, url: str, *, token: str | None = None, timeout: float = 2.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise UserError(f"sidecar URL must start with http:// or https://, got {url!r}")
        if timeout <= 0:
            raise UserError(f"sidecar timeout must be > 0 seconds, got {timeout}")
        self.url = url.rstrip("/")
        parts = urllib.parse.urlsplit(self.url)
        if not parts.hostname:
            raise UserError(f"sidecar URL has no host: {url!r}")
        self._https = parts.scheme == "https"
        self._host, self._port, self._prefix = parts.hostname, parts.port, parts.path
        self.token = token
        self.timeout = timeout

    def _post(self, path: str, body: dict) -> tuple[int, bytes]:
        """(status, body) of one POST, all of it within ``timeout`` seconds."""
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = kind(self._host, self._port, timeout=self.timeout)
        expired = threading.Event()

        def abort() -> None:
            expired.set()
            if conn.sock is not None:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(self.timeout, abort)
        timer.daemon = True
        timer.start()
        timed_out = SidecarUnavailable(f"sidecar timed out after {self.timeout} s")
        try:
            try:
                conn.connect()
            except OSError as exc:
                if expired.is_set() or isinstance(exc, TimeoutError):
                    raise timed_out from None
                raise SidecarUnavailable(f"sidecar unreachable: {exc}") from None
            if expired.is_set():  # connected after the deadline, before the watchdog could see a socket
                raise timed_out
            conn.request("POST", self._prefix + path, body=data, headers=headers)
            resp = conn.getresponse()
            payload = resp.read()
        except TimeoutError:
            raise timed_out from None
        except http.client.IncompleteRead as exc:
            if expired.is_set():
                raise timed_out from None
            raise SidecarUnavailable(f"sidecar answer truncated ({len(exc.partial)} bytes, "
                                     f"{exc.expected} more expected)") from None
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set():
                raise timed_out from None
            raise SidecarUnavailable(f"sidecar answer unreadable: {exc!r}") from None
        finally:
            timer.cancel()
            conn.close()
        if expired.is_set():  # the watchdog fired as the last byte came in
            raise timed_out
        return resp.status, payload

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
