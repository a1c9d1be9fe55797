"""The sidecar's ``/v1/encode`` from the indexing side: each question's neural vector and BOW terms
(and ``es setup``'s token check, on ``/v1/rerank`` for a pairwise model, which has no vectors).

Indexing must not lose documents silently, so an unreachable sidecar or a refused batch raises with
the reason. The bulk indexer counts every id of a batch the sidecar did not answer as failed (and says
why); a batch it refused (:attr:`EmbedError.refused_a_text`) is split until the texts it refuses fail
alone, each with the sidecar's message, and the rest are indexed.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from es_plugin_bridge.bridge.sidecar_target import SidecarTarget, untrusted_certificate
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.mappings import rerank_text
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.request_deadline import HEADER, header_value


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


class SidecarEmbedder:
    def __init__(self, url: str, *, token: str | None = None, timeout: float = 60.0,
                 ca_certs: str | None = None) -> None:
        target = SidecarTarget(url, token, timeout, ca_certs)  # the one set of checks
        self.url, self.token, self.timeout = target.url, token, timeout
        self._tls = target.ssl_context()

    @classmethod
    def reaching(cls, target: SidecarTarget, timeout: float | None = None) -> SidecarEmbedder:
        """The embedder for a :class:`~es_plugin_bridge.bridge.sidecar_target.SidecarTarget` (``timeout``
        overrides the target's: bulk embedding waits longer than a search)."""
        return cls(target.url, token=target.token, timeout=target.timeout if timeout is None else timeout,
                   ca_certs=target.ca_certs)

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        headers = {"Content-Type": "application/json", HEADER: header_value(self.timeout)}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}{path}", data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._tls) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            raise EmbedError(f"sidecar answered {exc.code} to {path}: {detail}", exc.code) from None
        except (OSError, json.JSONDecodeError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):  # a setting to fix, not an outage
                raise UserError(untrusted_certificate(reason)) from None
            raise EmbedError(f"sidecar at {self.url} did not answer {path}: {reason}") from None

    def ready(self) -> dict[str, Any]:
        """``GET /readyz`` (model name, type, dimension, fusion stages); UserError when it does not answer."""
        try:
            return self._request("GET", "/readyz")
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
            answer = self._request("POST", "/v1/rerank", {"query": text, "documents": [text]})
            results = answer.get("results") if isinstance(answer, dict) else None
            if not isinstance(results, list) or len(results) != 1:
                count = len(results) if isinstance(results, list) else 0
                raise EmbedError(f"sidecar answered {count} results to /v1/rerank for one document")
        except EmbedError as exc:
            raise UserError(str(exc)) from None

    def embed(self, questions: Sequence[Question]) -> list[dict[str, Any]]:
        """One ``{"vector": [...], "terms": {token: weight}}`` per question, in order."""
        # As the strings Elasticsearch itself sends (mode native): a question with an empty title
        # still embeds, and both paths see the same text.
        body = {"texts": [rerank_text(q) for q in questions]}
        answer = self._request("POST", "/v1/encode", body)
        embeddings = answer.get("embeddings") if isinstance(answer, dict) else None
        if not isinstance(embeddings, list) or len(embeddings) != len(questions):
            raise EmbedError(
                f"sidecar answered {len(embeddings or [])} embeddings for {len(questions)} texts"
            )
        return embeddings
