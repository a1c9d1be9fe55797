"""A real sidecar process for the tests that need one over HTTP, and a proxy that slows it down.

``serve`` runs ``esrerank serve MODEL`` on a free 127.0.0.1 port (bearer token from a file, as a
deployment keeps it) and waits for ``/readyz``; ``slowed`` forwards every request to a URL after a
delay, so a caller's timeout can be met by a real, slow answer.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from es_plugin_bridge.local_http import NotReady, free_port, wait_until_ready


def wait_ready(url: str, process: subprocess.Popen | None = None, timeout: float = 60.0,
               log: Path | None = None) -> None:
    """Return once ``url/readyz`` answers 200; RuntimeError (with the server's ``log``) otherwise."""
    try:
        wait_until_ready(f"{url}/readyz", timeout=timeout,
                         alive=lambda: process is None or process.poll() is None)
    except NotReady as exc:
        exited = process is not None and process.poll() is not None
        detail = log.read_text(encoding="utf-8", errors="replace")[-4000:] if exited and log else str(exc)
        raise RuntimeError(f"the sidecar at {url} did not come up: {detail}") from None


@contextlib.contextmanager
def serve(model: Path, token: str, token_dir: Path, *extra: str, token_file_text: str | None = None,
          ) -> Iterator[str]:
    """``esrerank serve`` on a free port; yields its URL and stops it on the way out. The token is read
    from a ``--token-file`` holding ``token_file_text`` (default: the token and a newline)."""
    token_file = token_dir / "token"
    token_file.write_text(token_file_text if token_file_text is not None else f"{token}\n", encoding="utf-8")
    token_file.chmod(0o600)
    port = free_port()
    exe = Path(sys.executable).with_name("esrerank")
    env = {k: v for k, v in os.environ.items() if k != "ESRERANK_TOKEN"}
    # Its output goes to a file, never to a pipe nobody reads: under load waitress logs a warning per
    # queued request, a full pipe then blocks the server's I/O thread, and the sidecar stops answering
    # (found by benchmarks/node_loss.py: 8 clients, every search waiting on a sidecar that wrote nothing).
    log = token_dir / f"sidecar-{port}.log"
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen([str(exe), "serve", str(model), "--port", str(port), "--token-file",
                                    str(token_file), "--onnx-threads", "1", *extra],
                                   stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, log=log)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def post(url: str, body: dict, token: str, timeout: float = 60.0) -> tuple[int, dict]:
    """POST JSON with the bearer token; ``(status, answer)`` whatever the status."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {token}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@contextlib.contextmanager
def slowed(target: str, delay: float) -> Iterator[str]:
    """A proxy on a free port that waits ``delay`` seconds, then forwards the request to ``target``."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            time.sleep(delay)
            keep = ("authorization", "content-type")
            headers = {k: v for k, v in self.headers.items() if k.lower() in keep}
            request = urllib.request.Request(target + self.path, data=body, method="POST", headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=60) as resp:
                    status, answer = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                status, answer = exc.code, exc.read()
            with contextlib.suppress(OSError):  # the caller may have given up already
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        def log_message(self, *args) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
