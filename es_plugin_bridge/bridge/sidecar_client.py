"""HTTP client of the sidecar's ``/v1/rerank``: a down or slow sidecar is ``SidecarUnavailable`` (the
caller falls back to the first-stage order); a request the sidecar refuses is a ``UserError``
(a wrong token or a model without β for the first stage is a configuration mistake to report,
not an outage to hide)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError


class SidecarUnavailable(Exception):
    """The sidecar did not answer usefully in time (connection refused, timeout, 5xx, bad body)."""


class SidecarClient:
    def __init__(self, url: str, *, token: str | None = None, timeout: float = 2.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise UserError(f"sidecar URL must start with http:// or https://, got {url!r}")
        if timeout <= 0:
            raise UserError(f"sidecar timeout must be > 0 seconds, got {timeout}")
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def rerank(
        self,
        query: Question,
        documents: Sequence[Question],
        first_stage_scores: Sequence[float] | None = None,
        first_stage: str | None = None,
    ) -> list[tuple[int, float]]:
        """(document index, relevance_score) for every document, best first."""
        body: dict = {
            "query": {"id": query.id, "title": query.title, "body": query.body},
            "documents": [{"id": d.id, "title": d.title, "body": d.body} for d in documents],
        }
        if first_stage_scores is not None:
            body["first_stage_scores"] = [float(s) for s in first_stage_scores]
            body["first_stage"] = first_stage
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(f"{self.url}/v1/rerank", data=json.dumps(body).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                answer = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            if exc.code >= 500:
                raise SidecarUnavailable(f"sidecar answered {exc.code}: {detail}") from None
            raise UserError(f"sidecar refused the request ({exc.code}): {detail}") from None
        except TimeoutError:
            raise SidecarUnavailable(f"sidecar timed out after {self.timeout} s") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise SidecarUnavailable(f"sidecar timed out after {self.timeout} s") from None
            raise SidecarUnavailable(f"sidecar unreachable: {exc.reason}") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise SidecarUnavailable(f"sidecar answer unreadable: {exc}") from None
        try:
            results = [(int(r["index"]), float(r["relevance_score"])) for r in answer["results"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise SidecarUnavailable(f"sidecar answer lacks results[].index/relevance_score: {exc}") from None
        if sorted(i for i, _ in results) != list(range(len(documents))):
            raise SidecarUnavailable("sidecar answer does not score every document exactly once")
        return results
