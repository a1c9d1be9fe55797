"""A free local port and "wait until this URL answers": the one way the node, the tests and the
benchmarks start a local server and wait for it (standard library only, as ``make opensearch`` runs it
with the system Python)."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable


class NotReady(RuntimeError):
    """The server did not answer in time, or its process exited first (the message says which)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Whether ``port`` on 127.0.0.1 can be bound now (so a node may take the port it had before)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_until_ready(url: str, *, timeout: float, alive: Callable[[], bool] = lambda: True,
                     ready: Callable[[bytes], bool] = lambda body: True, poll: float = 0.1) -> None:
    """Return once ``GET url`` answers 200 with a body ``ready`` accepts; :class:`NotReady` when the
    process ``alive`` watches exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            raise NotReady(f"the process serving {url} exited while starting")
        try:
            with urllib.request.urlopen(url, timeout=max(1.0, poll * 10)) as resp:
                if ready(resp.read()):
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise NotReady(f"{url} did not answer within {timeout:.0f} s")
        time.sleep(poll)
