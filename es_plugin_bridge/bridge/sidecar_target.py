"""The sidecar as this machine reaches it, one value: URL, bearer token and seconds per call.

Built once from the command line (``cli.es_options.sidecar_options``, one default per setting) and
passed whole to whatever calls the sidecar: the bridge's client, the modes' embedders.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass

from es_plugin_bridge.bearer_token import check_token
from es_plugin_bridge.errors import UserError

DEFAULT_URL = "http://127.0.0.1:8080"
#: One default for every command: long enough for a cold sidecar to encode a window of 100 (an
#: evaluation must not fall back for want of patience); a search that must answer sooner passes less.
DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class SidecarTarget:
    """URL (http or https, with a host), bearer token (None: none) and seconds to wait per call."""

    url: str = DEFAULT_URL
    token: str | None = None
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise UserError(f"sidecar URL must start with http:// or https://, got {self.url!r}")
        host = urllib.parse.urlsplit(self.url.rstrip("/")).hostname
        if not host:
            raise UserError(f"sidecar URL has no host: {self.url!r}")
        try:
            host.encode("idna")  # as socket.getaddrinfo encodes it (an empty label fails)
        except UnicodeError:
            raise UserError(f"sidecar URL has a malformed host: {self.url!r}") from None
        if self.timeout <= 0:
            raise UserError(f"sidecar timeout must be > 0 seconds, got {self.timeout}")
        if self.token:  # an empty token means none, as the environment variable left empty does
            check_token(self.token, "sidecar token")
        object.__setattr__(self, "url", self.url.rstrip("/"))
