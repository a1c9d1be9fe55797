"""The one rule a bearer token follows, for the sidecar that checks it and every client that sends it.

Visible ASCII without spaces: anything else cannot even be sent as a header (http.client refuses a line
break) or never matches what a client sends.
"""

from __future__ import annotations

import re

from es_plugin_bridge.errors import UserError

_TOKEN = re.compile(r"[\x21-\x7e]+")


def check_token(token: str | None, what: str = "the bearer token") -> None:
    """UserError unless ``token`` is None (no authentication) or visible ASCII without spaces.

    An empty token is refused rather than taken to mean "no authentication".
    """
    if token is None:
        return
    if not token:
        raise UserError(f"{what} is empty; give a real token, or none to serve without one")
    if not _TOKEN.fullmatch(token):
        raise UserError(f"{what} must be printable ASCII without spaces or line breaks")


def scheme_folded(authorization: str) -> str:
    """An ``Authorization`` value with its scheme spelt ``Bearer``: RFC 9110 11.1 makes the scheme
    case-insensitive (``bearer``, ``BEARER``); the token after it stays compared byte for byte. The
    server (before the body is read) and the app compare the result with ``Bearer <token>``."""
    scheme, space, rest = authorization.partition(" ")
    return "Bearer" + space + rest if scheme.lower() == "bearer" else authorization
