"""Import saved objects through Kibana's saved-objects import API (``POST /api/saved_objects/_import``).

Standard library only (urllib, a hand-built multipart body), so the command runs in the slim image.
Kibana answers 200 even when it refuses some objects: ``success: false`` with one entry per refused
object in ``errors``; ``successResults[].overwrite`` marks an object that replaced an existing one.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from es_plugin_bridge.errors import UserError


@dataclass(frozen=True)
class KibanaAuth:
    """One of: an API key (the encoded ``id:key`` Kibana shows), or a user name and password."""

    api_key: str | None = None
    username: str | None = None
    password: str | None = None
    ca_certs: Path | None = None

    def headers(self) -> dict[str, str]:
        if self.api_key and self.username:
            raise UserError("give either --api-key or --username/--password, not both")
        if self.api_key:
            return {"Authorization": f"ApiKey {self.api_key}"}
        if self.username:
            if self.password is None:
                raise UserError("--username needs --password (or ESRERANK_KIBANA_PASSWORD)")
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode("ascii")
            return {"Authorization": f"Basic {token}"}
        return {}

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.ca_certs is None:
            return None
        if not Path(self.ca_certs).is_file():
            raise UserError(f"--ca-certs {self.ca_certs}: not a file")
        return ssl.create_default_context(cafile=str(self.ca_certs))


@dataclass
class ImportOutcome:
    """What Kibana did with each object: ``(type, id, title)`` created or replaced, and refusals."""

    created: list[tuple[str, str, str]] = field(default_factory=list)
    replaced: list[tuple[str, str, str]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


class KibanaUnreachable(UserError):
    """No HTTP answer at all (refused connection, DNS, TLS, timeout)."""


class KibanaClient:
    def __init__(self, url: str, auth: KibanaAuth | None = None, *, space: str | None = None,
                 timeout: float = 30.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise UserError(f"--kibana-url must start with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        self.auth = auth or KibanaAuth()
        self.base = f"{self.url}/s/{urllib.parse.quote(space, safe='')}" if space else self.url
        self.timeout = timeout
        self._headers = self.auth.headers()
        self._ssl = self.auth.ssl_context()

    def _send(self, method: str, url: str, body: bytes | None = None,
              headers: dict[str, str] | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(url, data=body, method=method,
                                         headers={"kbn-xsrf": "true", **self._headers, **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._ssl) as resp:
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise KibanaUnreachable(f"Kibana at {self.url} is unreachable: {reason}") from None

    def wait_available(self, seconds: float, sleep: Callable[[float], None] = time.sleep) -> None:
        """Poll ``/api/status`` until Kibana says it is available (``level: available``) or time runs out."""
        deadline = time.monotonic() + seconds
        last = "no answer"
        while True:
            try:
                code, body = self._send("GET", f"{self.url}/api/status")
            except KibanaUnreachable as exc:
                code, body, last = 0, None, str(exc).rpartition(": ")[2]
            if code in (401, 403):
                raise UserError(f"Kibana at {self.url} refused the credentials (HTTP {code})")
            if code:
                status = body.get("status", {}) if isinstance(body, dict) else {}
                level = status.get("overall", {}).get("level")
                if code == 200 and level == "available":
                    return
                last = f"HTTP {code}" + (f", status {level}" if level else "")
            if time.monotonic() >= deadline:
                raise UserError(f"Kibana at {self.url} was not available within {seconds:g} s ({last})")
            sleep(min(3.0, max(0.1, deadline - time.monotonic())))

    def import_objects(self, ndjson: str, *, overwrite: bool = True) -> ImportOutcome:
        """Import one NDJSON file; raise a one-line ``UserError`` when Kibana refuses the request."""
        boundary = f"esrerank-{uuid.uuid4().hex}"
        head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"esrerank.ndjson\"\r\nContent-Type: application/ndjson\r\n\r\n")
        body = head.encode() + ndjson.encode() + f"\r\n--{boundary}--\r\n".encode()
        url = f"{self.base}/api/saved_objects/_import" + ("?overwrite=true" if overwrite else "")
        content_type = f"multipart/form-data; boundary={boundary}"
        code, answer = self._send("POST", url, body, {"Content-Type": content_type})
        if code != 200 or not isinstance(answer, dict):
            message = answer.get("message") if isinstance(answer, dict) else None
            raise UserError(f"Kibana refused the import (HTTP {code}): {message or answer or 'no body'}")
        outcome = ImportOutcome()
        for result in answer.get("successResults", []):
            entry = (result["type"], result.get("destinationId") or result["id"],
                     (result.get("meta") or {}).get("title", ""))
            (outcome.replaced if result.get("overwrite") else outcome.created).append(entry)
        for error in answer.get("errors", []):
            outcome.refused.append(_describe(error))
        return outcome


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode("utf-8", "replace")[:200]


def _describe(error: dict[str, Any]) -> str:
    """``lens esrerank-x: missing_references (index-pattern foo)`` from one entry of ``errors``."""
    detail = error.get("error", {})
    kind = detail.get("type", "error")
    extra = detail.get("message") or ", ".join(f"{r.get('type')} {r.get('id')}"
                                               for r in detail.get("references", []))
    return f"{error.get('type')} {error.get('id')}: {kind}" + (f" ({extra})" if extra else "")
