"""The sidecar's HTTP server: waitress, hardened for a service on the query path of every search.

waitress receives and buffers a whole request on its event loop before a worker thread sees it. Left
at its defaults that lets a client (1) send up to 1 GB that is spooled to disk before the app can
check the token, (2) hold one of only 100 connections for as long as it keeps trickling bytes, and
(3) get plain-text 400/413/431 answers. Here:

- the bearer token (any of ``serving.token_file.Tokens``) is checked as soon as the headers are in,
  before any of the body is read: a request without it is answered 401 and its connection closed;
- a POST is admitted to the bounded queue (``serving.admission``) once it is whole (a client trickling
  its body holds a connection, not a place): beyond ``max_queue`` requests in, it is answered 503 with
  ``Retry-After``;
- each request's first byte is timed (``esrerank.received`` in the WSGI environ: the start of its
  deadline, ``serving.deadline``), and a channel stays readable while its request runs
  (``channel_request_lookahead``), so a client that hangs up is seen (``waitress.client_disconnected``);
- the body is capped (``max_body_bytes``, 32 MB by default) from its ``Content-Length``, before it is
  received;
- a request must arrive whole within ``request_timeout`` seconds of its first byte, whatever its pace
  (slowloris), a new connection must send that first byte within ``request_timeout`` of opening, and an
  idle keep-alive connection is closed after ``idle_timeout``; the connection limit is
  ``max_connections`` (waitress: 100), on poll() so it is not bound by select()'s 1024 fds;
- at that limit, idle connections (no request under way: those that never sent one first, then the
  longest idle) are closed to make room, instead of waitress's default of accepting nothing until one
  ends: one host holding hundreds of silent connections would otherwise queue every other client's
  connection behind them for as long as ``idle_timeout`` (issue 34, item 10);
- a TLS handshake sent to this plain-HTTP server (an ``https://`` URL for an ``http://`` sidecar) is
  answered 400 at once, so the client's TLS layer fails now instead of waiting ``request_timeout``
  for a request that never comes (issue 34, item 11);
- every answer the server makes itself (400, 401, 408-close, 413, 431, 503, 500) is JSON ``{"error": ...}``,
  and every refusal (those answers, and a late request's dropped connection) goes to ``on_reject``
  (``Metrics.reject``: counted by reason, one log line) — they never reach the app to be counted there;
- a refused request's connection lingers before it closes (``LINGER_S``): the answer is sent, the
  server's side shut down, and what the client still sends (the rest of a body over the cap) read and
  dropped until it closes its side or the time is up. Closing a socket with unread bytes sends a reset,
  which can destroy the answer on its way: a client posting a body over ``--max-body-mb`` read "connection
  reset" or "broken pipe", never the 413 that says why (nor could ``es index`` split its batch);
- ``host="::"`` listens on IPv4 too where the OS allows (a dual-stack socket; waitress sets
  ``IPV6_V6ONLY``, which made ``--host ::`` unreachable over IPv4).

Beyond these bounds (thousands of slow connections from many addresses), put a reverse proxy that
buffers requests (nginx, Envoy) in front, as for any Python WSGI server.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import BaseWSGIServer, MultiSocketServer, TcpWSGIServer
from waitress.task import ErrorTask, ThreadedTaskDispatcher, WSGITask
from waitress.utilities import BadRequest, Error

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving.admission import RETRY_AFTER_S, Admission
from es_plugin_bridge.serving.token_file import Tokens

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
#: ``on_reject(status, reason, method, path, client, message)``: the signature of ``Metrics.reject``.
OnReject = Callable[[int, str, str, str, str, str], None]
#: ``on_drop(stage, method, path, client, message)``: the signature of ``Metrics.drop``.
OnDrop = Callable[[str, str, str, str, str], None]
#: The reason of each waitress error, as ``Metrics`` names the app's own.
_REASONS = {400: "bad_request", 401: "unauthorized", 413: "body_too_large", 431: "headers_too_large",
            503: "queue_full"}
#: The WSGI environ key holding ``time.monotonic()`` of a request's first byte.
RECEIVED = "esrerank.received"
#: Seconds a refused request's connection keeps reading (and dropping) what its client still sends after
#: the answer, so that the answer is not lost to a reset (Apache's lingering close takes 2 s too).
LINGER_S = 2.0
#: Bytes a lingering connection reads a turn (waitress's ``recv_bytes`` is 8 KB: a 40 MB body's rest in
#: 640 reads, not 5,000).
_LINGER_READ = 64 * 1024


@dataclass(frozen=True)
class Limits:
    """What one client may cost the server; the defaults are what ``esrerank serve`` uses."""

    max_body_bytes: int = 32 * 1024 * 1024
    max_header_bytes: int = 64 * 1024
    request_timeout: float = 10.0  # from a request's first byte to its last
    idle_timeout: float = 60.0  # keep-alive connection with no request under way
    max_connections: int = 500
    max_queue: int = 128  # scoring requests received, waiting or computing at once (serving.admission)


class ServerSettings(Protocol):
    """What the server reads of ``serving.settings.Settings`` (a protocol: the server imports no app code)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def threads(self) -> int: ...
    @property
    def token(self) -> str | None: ...
    @property
    def token_file(self) -> Path | None: ...
    @property
    def limits(self) -> Limits: ...


class Unauthorized(Error):
    code = 401
    reason = "Unauthorized"


class Busy(Error):
    code = 503
    reason = "Service Unavailable"


class _JsonErrorTask(ErrorTask):
    """waitress's own error answers, as JSON like every other answer of the sidecar."""

    def execute(self) -> None:
        error = self.request.error
        detail = f"{error.reason}: {error.body}"
        if error.code == 413:  # waitress says "exceeds max_body of N": name the unit and the option
            detail += " bytes (esrerank serve --max-body-mb): send fewer or shorter texts a request"
        body = json.dumps({"error": detail}).encode()
        self.status = f"{error.code} {error.reason}"
        on_reject: OnReject | None = getattr(self.channel.server, "on_reject", None)
        if on_reject is not None:
            request = self.request
            on_reject(error.code, _REASONS.get(error.code, f"http_{error.code}"), *_line(request),
                      _client(self.channel), detail)
        self.response_headers.append(("Content-Type", "application/json"))
        if isinstance(error, Unauthorized):
            self.response_headers.append(("WWW-Authenticate", "Bearer"))
        if isinstance(error, Busy):
            self.response_headers.append(("Retry-After", str(RETRY_AFTER_S)))
        self.set_close_on_finish()
        self.channel.linger = True  # the client may still be sending: let it read this answer
        self.content_length = len(body)
        self.write(body)


class _GuardedParser(HTTPRequestParser):
    """A request parser that refuses an unauthenticated request once its headers are in, and a POST
    beyond the queue once it is whole."""

    tokens: Tokens | None = None  # set per server
    admission: Admission | None = None  # set per server
    started: float
    checked = False
    got_bytes = False
    queued = False  # the queue has seen this request
    admitted = False

    def __init__(self, adj: Adjustments) -> None:
        super().__init__(adj)
        self.started = time.monotonic()

    def received(self, data: bytes) -> int:
        first, self.got_bytes = not self.got_bytes, True
        if first and _is_tls_hello(data):
            # A TLS ClientHello record: content type 22 (handshake), then protocol major version 3 (RFC
            # 8446, 5.1). No HTTP request starts with byte 0x16; answering now makes the client's TLS
            # layer fail at once (it reads "HTTP/1.1 400" where it expects a ServerHello).
            self.checked = True
            self.error = BadRequest("a TLS handshake reached this plain-HTTP sidecar: reach it with http://")
            self.completed = True
            return len(data)
        consumed = super().received(data)
        if self.headers_finished and not self.checked:
            self.checked = True
            if (self.error is None and self.tokens and self.path not in OPEN_PATHS
                    and not self.tokens.accepts(self.headers.get("AUTHORIZATION", ""))):
                self.error = Unauthorized("missing or wrong bearer token")
                self.completed = True  # the body is never read: the connection closes after the 401
        if self.completed and self.error is None and self.admission is not None and not self.queued:
            # Admitted once whole: a client trickling its body holds a connection, never a place.
            self.queued = True
            if self.command == "POST":
                self.admitted = self.admission.enter()
                if not self.admitted:
                    self.error = Busy(self.admission.busy_message())  # answered at once; connection closed
        return consumed

    def close(self) -> None:
        """Free the request's place in the queue (its answer is written, or its connection closed)."""
        if self.admitted and self.admission is not None:
            self.admitted = False
            self.admission.leave()
        super().close()


def _is_tls_hello(data: bytes) -> bool:
    return len(data) >= 2 and data[0] == 0x16 and data[1] == 0x03


def _line(request: HTTPRequestParser) -> tuple[str, str]:
    """(method, path) of a request, "-" for what has not arrived (a request cut off in its headers)."""
    return getattr(request, "command", None) or "-", getattr(request, "path", None) or "-"


def _client(channel: HTTPChannel) -> str:
    addr = getattr(channel, "addr", None)
    return str(addr[0]) if isinstance(addr, tuple) and addr else "-"


class _Task(WSGITask):
    """waitress's WSGI task, with the time of the request's first byte in the environ."""

    def get_environment(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environment()
        environ[RECEIVED] = getattr(self.request, "started", time.monotonic())
        return environ


class _Channel(HTTPChannel):
    error_task_class = _JsonErrorTask
    task_class = _Task
    receiving = False  # inside received(): a refusal found now is answered on the event loop
    answer_now = False

    def received(self, data: bytes) -> bool:
        """waitress's, but a request refused while parsing (401, 503 queue full, 413, ...) is answered
        here on the event loop, not queued for a request thread behind the work it refuses to add to."""
        self.receiving = True
        try:
            result = bool(super().received(data))
        finally:
            self.receiving = False
        if self.answer_now:
            self.answer_now = False
            self.service()  # an error task: a JSON line written to the buffer, the connection closing
        return result

    # -- lingering close (LINGER_S) -----------------------------------------------------------------
    linger = False  # the answer refuses a request whose client may still be sending
    lingering_until: float | None = None  # time.monotonic() at which a lingering channel closes

    def handle_close(self) -> None:
        """waitress's, but a channel that answered a refusal first shuts down its sending side and reads
        what is still coming, so the client's TCP stack never sees a reset before it has read the answer."""
        if self.linger and self.lingering_until is None and self.connected and not self.total_outbufs_len:
            try:
                self.socket.shutdown(socket.SHUT_WR)  # FIN after the answer's last byte
            except OSError:
                pass
            else:
                self.lingering_until = time.monotonic() + LINGER_S
                self.will_close = False
                return
        super().handle_close()

    def readable(self) -> bool:
        return True if self.lingering_until is not None else bool(super().readable())

    def writable(self) -> bool:
        """While lingering, "writable" once its time is up (or the server wants the room): the event loop
        then closes it through :meth:`handle_write`, whether or not the client still sends."""
        if self.lingering_until is not None:
            return self.will_close or time.monotonic() >= self.lingering_until
        return bool(super().writable())

    def handle_write(self) -> None:
        if self.lingering_until is not None:
            HTTPChannel.handle_close(self)
            return
        super().handle_write()

    def handle_read(self) -> None:
        """waitress's; a lingering channel drops what it reads and closes once the client has closed."""
        if self.lingering_until is None:
            super().handle_read()
            return
        try:
            data: bytes | None = self.recv(_LINGER_READ)  # b"": the client closed, and recv closed this
        except OSError:
            data = None
        if data is None or (data and time.monotonic() >= self.lingering_until):
            HTTPChannel.handle_close(self)

    def service(self) -> None:
        """waitress's; it skips a request whose client hung up while it waited: counted as dropped."""
        request = self.requests[0] if self.requests else None
        on_drop: OnDrop | None = getattr(self.server, "on_drop", None)
        if request is not None and not request.error and not self.connected and on_drop is not None:
            on_drop("client_gone_before_start", *_line(request), _client(self),
                    "the client closed its connection while its request waited: not computed")
        super().service()


class _Server(TcpWSGIServer):
    request_timeout = 10.0
    on_reject: OnReject | None = None
    on_drop: OnDrop | None = None

    def add_task(self, task: Any) -> None:
        """Queue a channel's request for a thread, unless it is a refusal found while parsing: that one
        the channel answers itself at once (``_Channel.received``)."""
        if isinstance(task, _Channel) and task.receiving and task.requests and task.requests[0].error:
            task.answer_now = True
            return
        super().add_task(task)

    def bind_server_socket(self) -> None:
        """Bind; on IPv6's unspecified address, as a dual-stack socket that takes IPv4 too."""
        if self.family == socket.AF_INET6 and self.sockinfo[3][0] in ("::", "::0"):
            with contextlib.suppress(OSError):  # an OS without dual stack: IPv6 only, as before
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().bind_server_socket()

    def readable(self) -> bool:
        """Accept while below the connection limit; at it, close idle connections to make room."""
        full = self.accepting and len(self._map) >= self.adj.connection_limit
        if full and self._make_room(len(self._map) - self.adj.connection_limit + 1):
            self.in_connection_overflow = True  # room is being made: no "limit reached" warning each turn
        return bool(super().readable())

    def _make_room(self, needed: int) -> bool:
        """Close ``needed`` idle connections (no request under way or queued): never used ones first,
        then the longest idle. They close on the event loop's next turn; a client whose idle keep-alive
        connection closes opens another, as after ``idle_timeout``."""
        idle = [c for c in self.active_channels.values()
                if not c.requests and c.request is None and not c.will_close and not c.total_outbufs_len]
        idle.sort(key=lambda c: (c.last_activity != c.creation_time, c.last_activity))
        closing = sum(1 for c in self.active_channels.values() if c.will_close)
        for channel in idle[:max(0, needed - closing)]:
            channel.will_close = True
        return bool(idle) or closing > 0

    def maintenance(self, now: float) -> None:
        """Close idle connections (waitress), those that sent nothing within request_timeout of opening
        and those whose request is not in after request_timeout."""
        super().maintenance(now)
        silent_since = now - self.request_timeout  # waitress's channel times are time.time()'s
        for channel in list(self.active_channels.values()):
            if (channel.request is None and not channel.requests and not channel.will_close
                    and channel.last_activity == channel.creation_time
                    and channel.creation_time < silent_since):
                channel.will_close = True
        deadline = time.monotonic() - self.request_timeout
        for channel in list(self.active_channels.values()):
            partial = channel.request
            if (partial is not None and not partial.completed and partial.started < deadline
                    and not channel.will_close):
                channel.will_close = True
                if self.on_reject is not None:
                    self.on_reject(408, "request_timeout", *_line(partial), _client(channel),
                                   f"request not received whole within {self.request_timeout} s")


class Server:
    """One listening sidecar; :meth:`run` serves until :meth:`close` (or Ctrl-C)."""

    def __init__(self, app: Callable[..., Any], *, host: str = "127.0.0.1", port: int = 8080,
                 threads: int = 4, token: str | Tokens | None = None, limits: Limits | None = None,
                 on_reject: OnReject | None = None) -> None:
        """Bind (UserError in one line if the address is invalid or in use) but serve nothing yet.

        ``token``: one token, or the :class:`Tokens` the app checks too. ``on_reject`` hears of every
        request refused before the app (default: the app's own ``Metrics.reject`` when ``app`` is the
        sidecar's Flask app).
        """
        limits = limits or Limits()
        tokens = token if isinstance(token, Tokens) else Tokens(token)
        self.admission = Admission(limits.max_queue)
        parser = type("Parser", (_GuardedParser,),
                      {"tokens": tokens if tokens else None, "admission": self.admission})
        channel = type("Channel", (_Channel,), {"parser_class": parser})
        metrics = getattr(app, "extensions", {}).get("esrerank_metrics")
        if on_reject is None and metrics is not None:
            on_reject = metrics.reject
        server_class = type("Server", (_Server,), {"channel_class": channel,
                                                    "request_timeout": limits.request_timeout,
                                                    "on_reject": on_reject and staticmethod(on_reject),
                                                    "on_drop": metrics and staticmethod(metrics.drop)})
        try:
            adj = Adjustments(
                host=host, port=port, threads=threads, ident="esrerank",
                max_request_body_size=limits.max_body_bytes,
                max_request_header_size=limits.max_header_bytes,
                # waitress reads it as an int: 0.5 s would be 0, closing every connection between requests.
                channel_timeout=max(1, math.ceil(limits.idle_timeout)),
                cleanup_interval=max(0.25, limits.request_timeout / 4),
                connection_limit=limits.max_connections, asyncore_use_poll=True,
                # A channel stays readable while its request runs, so a client that hangs up is seen.
                channel_request_lookahead=1,
            )
        except (OSError, ValueError) as exc:  # getaddrinfo: an address that does not resolve
            raise UserError(f"cannot listen on {host}:{port}: {exc}") from None
        self._map: dict[int, Any] = {}
        self.dispatcher = ThreadedTaskDispatcher()
        self.servers: list[BaseWSGIServer] = []
        try:
            for sockinfo in adj.listen:
                self.servers.append(server_class(app, self._map, dispatcher=self.dispatcher, adj=adj,
                                                 sockinfo=sockinfo))
        except OSError as exc:
            self._close_sockets()
            raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.dispatcher.set_thread_count(threads)
        self.adj = adj
        first = self.servers[0]
        self.host, self.port = first.effective_host, int(first.effective_port)

    @classmethod
    def for_app(cls, app: Any) -> Server:
        """The server for a sidecar app from ``create_app``, bound by the settings the app was built from
        (``app.extensions["esrerank_settings"]``): the tokens and body cap it checks before the app are
        the app's own (one :class:`Tokens`, so a rotated token file is re-read once for both)."""
        settings = cast(ServerSettings, app.extensions["esrerank_settings"])
        tokens = app.extensions.get("esrerank_tokens") or Tokens(settings.token, settings.token_file)
        return cls(app, host=settings.host, port=settings.port, threads=settings.threads,
                   token=tokens, limits=settings.limits)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self) -> None:
        if len(self.servers) == 1:
            self.servers[0].run()
        else:
            listening = [(s.effective_host, s.effective_port) for s in self.servers]
            MultiSocketServer(self._map, self.adj, listening, self.dispatcher).run()

    def _close_sockets(self) -> None:
        for server in self.servers:
            server.close()
        for channel in list(self._map.values()):
            with contextlib.suppress(OSError):
                channel.close()

    def close(self) -> None:
        """Stop accepting, close every connection and stop the worker threads."""
        self.dispatcher.shutdown(timeout=5)
        self._close_sockets()

