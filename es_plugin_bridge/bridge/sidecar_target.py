"""The sidecar as this machine reaches it, one value: URL, bearer token, seconds per call and, for an
``https://`` sidecar (TLS ended by a proxy in front of ``esrerank serve``), the CA file its certificate is
checked against (default: the system's trust store).

Built once from the command line (``cli.es_options.sidecar_options``, one default per setting) and
passed whole to whatever calls the sidecar: the bridge's client, the modes' embedders.
"""

from __future__ import annotations

import ssl
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from es_plugin_bridge.bearer_token import check_token
from es_plugin_bridge.errors import UserError

DEFAULT_URL = "http://127.0.0.1:8080"
#: One default for every command: long enough for a cold sidecar to encode a window of 100 (an
#: evaluation must not fall back for want of patience); a search that must answer sooner passes less.
DEFAULT_TIMEOUT = 10.0


@dataclass(frozen=True)
class SidecarTarget:
    """URL (http or https, with a host), bearer token (None: none), seconds to wait per call and the CA
    file (PEM) of an https sidecar (None: the system's)."""

    url: str = DEFAULT_URL
    token: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    ca_certs: str | None = None

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
        if self.ca_certs is not None:
            if not self.url.startswith("https://"):
                raise UserError(f"a sidecar CA file applies to an https:// sidecar, not {self.url!r}")
            self.ssl_context()  # a missing or unreadable file is told now, not at the first call

    def ssl_context(self) -> ssl.SSLContext | None:
        """How an https sidecar's certificate is checked (host name and chain); None for http."""
        if not self.url.startswith("https://"):
            return None
        if self.ca_certs is not None and not Path(self.ca_certs).is_file():
            raise UserError(f"sidecar CA file not found: {self.ca_certs}")
        try:
            return ssl.create_default_context(cafile=self.ca_certs)
        except (ssl.SSLError, ValueError) as exc:
            raise UserError(f"sidecar CA file {self.ca_certs} holds no PEM certificate: {exc}") from None


def untrusted_certificate(exc: ssl.SSLCertVerificationError) -> str:
    """What to tell when an https sidecar's certificate fails the check: a setting to fix, not an outage."""
    return (f"the sidecar's certificate is not trusted here ({exc.verify_message}): give its CA with "
            "--sidecar-ca-certs FILE [env ESRERANK_SIDECAR_CA_CERTS]")
