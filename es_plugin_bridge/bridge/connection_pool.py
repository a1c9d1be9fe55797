"""Persistent connections to the sidecar, kept between the bridge's calls.

A new connection per call (as before issue 34, item 10) puts every search behind the sidecar's accept
queue: a host holding hundreds of slow connections to the sidecar kept the bridge's searches waiting
seconds for a slot, while OpenSearch's own pooled connections went on at once. A call here takes an
idle connection (or opens one), and gives it back once its answer is read whole and the server keeps
it open; a call that failed or was abandoned at its deadline closes its own.

:class:`SidecarConnection` also says which step a fresh connection is in (TCP connect, TLS handshake,
HTTP) and hands its socket over as soon as it has one, so a deadline can end a call stuck in any step
and a failure can be told by its step (a TLS handshake that fails is a wrong ``https://``, not an
outage).
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
from collections.abc import Callable

#: Idle connections kept per client: more than the searches one process runs at once, as a rule.
DEFAULT_IDLE = 16


class SidecarConnection(http.client.HTTPConnection):
    """``http.client``'s connection, over TLS when ``tls`` is given, telling its ``step`` ("connect",
    "tls", "http") and giving its socket to ``on_socket`` before any step that may block on the peer."""

    def __init__(self, host: str, port: int, timeout: float, tls: ssl.SSLContext | None) -> None:
        super().__init__(host, port, timeout=timeout)
        self.tls = tls
        self.step = "connect"
        self.on_socket: Callable[[socket.socket], None] = lambda sock: None

    def connect(self) -> None:
        self.step = "connect"
        super().connect()  # TCP only: create_connection and TCP_NODELAY
        self.on_socket(self.sock)
        if self.tls is not None:
            self.step = "tls"
            # Wrapped first and shaken hands with after, so that the socket a deadline shuts down is the
            # one in the handshake (wrap_socket detaches the plain socket it is given).
            self.sock = self.tls.wrap_socket(self.sock, server_hostname=self.host,
                                             do_handshake_on_connect=False)
            self.on_socket(self.sock)
            self.sock.do_handshake()
        self.step = "http"


def dropped(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection can no longer carry a request: closed here, or readable while no
    request is under way (the server closed it — an end of file — or sent what nobody asked for)."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):  # closed under us
        return True
    return bool(readable)


class ConnectionPool:
    """Idle connections to one sidecar, shared by the threads that call it; ``opened`` counts the
    connections made (what a test of the reuse reads)."""

    def __init__(self, make: Callable[[], SidecarConnection], idle: int = DEFAULT_IDLE) -> None:
        self._make = make
        self._size = idle
        self._idle: list[SidecarConnection] = []
        self._lock = threading.Lock()
        self.opened = 0

    def take(self) -> tuple[SidecarConnection, bool]:
        """An idle connection still open (True: reused), else a new one, not yet connected (False)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self.fresh(), False
            if not dropped(conn):
                return conn, True
            conn.close()

    def fresh(self) -> SidecarConnection:
        """A new connection, not yet connected."""
        with self._lock:
            self.opened += 1
        return self._make()

    def give_back(self, conn: SidecarConnection) -> None:
        """Keep ``conn`` for the next call if it is open and there is room; close it otherwise."""
        if conn.sock is not None:
            with self._lock:
                if len(self._idle) < self._size:
                    self._idle.append(conn)
                    return
        conn.close()

    def close(self) -> None:
        """Close every idle connection (the ones in use close when their calls end)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
