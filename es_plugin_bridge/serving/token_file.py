"""The bearer tokens one sidecar accepts: one given once, and/or a file of one token per client cluster.

A token stored in a cluster (an ml-commons connector's credential, an inference endpoint's
``api_key``) can be read back by whoever can read that cluster's system indices; on a cluster without
a security plugin that is anyone who reaches the node (issue 48, item 1). So each cluster gets its own
token, one line of ``--token-file``: a token read out of one cluster opens this sidecar to nobody else,
and removing its line revokes it. The file is re-read when it changes (its mtime, size or inode,
looked at no more than once a second), so a token is added, rotated or revoked without a restart.

The file: one token per line; blank lines and lines starting with ``#`` are ignored. A file that
cannot be read or holds no valid token at start is a UserError naming it; one that goes bad later
(mid-rewrite, deleted) keeps the tokens last read, with one log line, so a botched edit never locks
every cluster out. Every comparison is constant-time against every token (no early exit on a match).
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from pathlib import Path

from es_plugin_bridge.bearer_token import check_token, scheme_folded
from es_plugin_bridge.errors import UserError

log = logging.getLogger("esrerank.sidecar")

#: Seconds between two looks at the token file's mtime.
RECHECK_S = 1.0


def read_tokens(path: Path) -> tuple[str, ...]:
    """The tokens of ``path`` (one a line; blank and ``#`` lines ignored); UserError naming what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the token file {path}: {exc}") from None
    tokens = []
    for number, line in enumerate(text.splitlines(), 1):
        token = line.strip()
        if token and not token.startswith("#"):
            check_token(token, f"line {number} of the token file {path}")
            tokens.append(token)
    if not tokens:
        raise UserError(f"the token file {path} holds no token: it is empty or all comments (one token "
                        "a line; # starts a comment)")
    return tuple(tokens)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class Tokens:
    """What the server (before the body) and the app check an ``Authorization`` header against."""

    def __init__(self, token: str | None = None, path: Path | None = None,
                 recheck_s: float = RECHECK_S) -> None:
        check_token(token)
        self._fixed = (token,) if token else ()
        self.path = Path(path) if path is not None else None
        self._recheck_s = recheck_s
        self._lock = threading.Lock()
        self._stamp = _stamp(self.path) if self.path is not None else None
        self._file = read_tokens(self.path) if self.path is not None else ()
        self._expected = self._encoded()
        self._checked = time.monotonic()

    def __bool__(self) -> bool:
        """Whether requests need a token at all."""
        return bool(self._fixed or self.path is not None)

    def __len__(self) -> int:
        self._refresh()
        return len(self._expected)

    def _encoded(self) -> tuple[bytes, ...]:
        return tuple(f"Bearer {t}".encode("latin-1") for t in (*self._fixed, *self._file))

    def _refresh(self) -> None:
        """Re-read the file if it changed since the last look (at most one look per ``recheck_s``)."""
        if self.path is None or time.monotonic() - self._checked < self._recheck_s:
            return
        with self._lock:
            now = time.monotonic()
            if now - self._checked < self._recheck_s:
                return
            self._checked = now
            stamp = _stamp(self.path)
            if stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                self._file = read_tokens(self.path)
            except UserError as exc:
                log.warning("token file unchanged in use (%d tokens kept): %s", len(self._file), exc)
                return
            self._expected = self._encoded()
            log.info("token file %s re-read: %d tokens", self.path, len(self._file))

    def accepts(self, authorization: str) -> bool:
        """Whether an ``Authorization`` value carries one of the tokens (scheme case-insensitive)."""
        self._refresh()
        given = scheme_folded(authorization).encode("latin-1", "replace")
        ok = False
        for expected in self._expected:  # every one compared: no timing tells which line matched
            ok |= hmac.compare_digest(given, expected)
        return ok


__all__ = ["RECHECK_S", "Tokens", "read_tokens"]
