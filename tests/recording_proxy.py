"""A proxy that forwards every request unchanged and records its method and path: the tests count what a
command sends to the cluster (``GET /`` once...), and ``before`` lets a test act on a request before it
is forwarded (slow it, notice it)."""

from __future__ import annotations

import contextlib
import http.server
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length", "accept-encoding"}


@dataclass
class Recording:
    url: str
    requests: list[tuple[str, str]] = field(default_factory=list)


@contextlib.contextmanager
def recording(target: str, before: Callable[[str, str], None] | None = None) -> Iterator[Recording]:
    """A proxy on a free port forwarding to ``target``; ``.requests``: (method, path without query);
    ``before(method, path)`` runs before each request is forwarded."""
    seen = Recording("")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0)) or None
            seen.requests.append((self.command, self.path.split("?", 1)[0]))
            if before is not None:
                before(self.command, self.path)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            request = urllib.request.Request(target + self.path, data=body, method=self.command,
                                             headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=120) as resp:
                    status, answer, kind = resp.status, resp.read(), resp.headers.get("Content-Type")
            except urllib.error.HTTPError as exc:
                status, answer, kind = exc.code, exc.read(), exc.headers.get("Content-Type")
            with contextlib.suppress(OSError):  # the caller may have given up already
                self.send_response(status)
                self.send_header("Content-Type", kind or "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(answer)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward  # noqa: N815 - http.server's names

        def log_message(self, *args) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    seen.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()
