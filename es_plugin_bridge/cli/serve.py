"""``esrerank serve MODEL_DIR``: the sidecar (Flask app on hardened waitress), bound to 127.0.0.1 by default.

The address is bound before anything is announced, so a bad host or a port in use is one ``error:``
line. The token is best given in a file (``--token-file``: one token per client cluster, re-read when
it changes, ``serving.token_file``) or the environment: a ``--token`` on the command line is visible to
every user of the machine (``ps``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:  # the serving stack loads only when the command runs (`esrerank --help` stays light)
    from es_plugin_bridge.serving.settings import Settings

#: Defaults measured on the 2-core machine of the benchmarks (benchmarks/sidecar.py, docs/sidecar-api.md).
#: (The cache size repeats serving.service.DEFAULT_CACHE_SIZE, not imported so `esrerank --help` stays light.)
DEFAULT_THREADS = 2
DEFAULT_ONNX_THREADS = 1
DEFAULT_CACHE_SIZE = 20_000
#: 16 rows a call: a request's uncached questions sorted by length and cut into calls of 16 cost the
#: transformer about a third of the CPU of one call padded to the longest (benchmarks/serving.py).
DEFAULT_BATCH_SIZE = 16


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        return os.cpu_count() or 1


def _encoder_workers(option: int | None) -> int | None:
    """``--encoder-workers``: unset → the cores; 0 → None (each request thread encodes, no pool)."""
    if option is None:
        return available_cores()
    return option or None


def _warn_if_readable(path: Path) -> None:
    """One warning line when the token file is readable by other users (the file itself is read, and
    refused in one line, by ``Settings``)."""
    try:
        if path.stat().st_mode & 0o077:
            click.echo(f"warning: {path} is readable by other users (chmod 600 it)", err=True)
    except OSError:
        pass  # Settings names the unreadable file


@click.command("serve", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model_dir", metavar="MODEL_DIR", type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback exposes the model to the network.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--token", envvar="ESRERANK_TOKEN", default=None,
              help="Bearer token required on every endpoint but /healthz and /readyz (or set "
                   "ESRERANK_TOKEN; on the command line it is visible to other users: prefer --token-file).")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="File of bearer tokens, one a line (one per client cluster; blank lines and lines "
                   "starting with # are ignored; chmod 600 it). Re-read when it changes: add, rotate or "
                   "revoke a token without a restart.")
@click.option("--expect-sha256", default=None, metavar="DIGEST",
              help="Refuse the model directory unless its manifest.json has this sha256 (printed at start).")
@click.option("--max-documents", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Most documents (or texts) one request may carry.")
@click.option("--max-body-mb", default=32, show_default=True, type=click.IntRange(min=1, max=1024),
              help="Largest request body, refused from its Content-Length before it is received.")
@click.option("--request-timeout", default=10.0, show_default=True, type=click.FloatRange(min=0.5),
              help="Seconds a client has to send one whole request (slow clients are disconnected).")
@click.option("--max-connections", default=500, show_default=True, type=click.IntRange(min=1),
              help="Open connections at most.")
@click.option("--max-queue", default=None, type=click.IntRange(min=1),
              help="Scoring requests received, waiting or computing at once; beyond, a request is answered "
                   "503 with Retry-After at once [default: 64 × --threads].")
@click.option("--deadline-ms", default=4500, show_default=True, type=click.IntRange(1, 600_000),
              help="Deadline of a request that sends no X-Request-Timeout-Ms header: work past it is "
                   "dropped and answered 504 (below ml-commons' connector read_timeout of 5 s).")
@click.option("--threads", default=DEFAULT_THREADS, show_default=True, type=click.IntRange(min=1),
              help="Request threads (waitress).")
@click.option("--onnx-threads", default=DEFAULT_ONNX_THREADS, show_default=True, type=click.IntRange(min=1),
              help="onnxruntime intra-op threads per request.")
@click.option("--cache-size", default=DEFAULT_CACHE_SIZE, show_default=True, type=click.IntRange(min=0),
              help="Candidate encodings kept in the LRU cache (0: no cache).")
@click.option("--batch-size", default=DEFAULT_BATCH_SIZE, show_default=True, type=click.IntRange(min=1),
              help="Most questions per encoder call: a request's uncached questions are sorted by length "
                   "and cut into calls of at most this many (a GPU wants more, e.g. 128).")
@click.option("--encoder-workers", default=None, type=click.IntRange(min=0),
              help="Encoder calls run at once, by workers shared by every request (a lone request's calls "
                   "run in parallel; concurrent requests' small calls are merged); 0: each request thread "
                   "runs its own calls [default: the cores this process may use].")
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where onnxruntime scores: auto takes CUDA when onnxruntime-gpu and a GPU are there "
                   "(else CPU, said in one log line); cuda refuses to start without them.")
@click.option("--name", default=None, help="Model name reported in responses (default TYPE:DIR).")
def serve_command(model_dir: Path, host: str, port: int, token: str | None, token_file: Path | None,
                  expect_sha256: str | None, max_documents: int, max_body_mb: int, request_timeout: float,
                  max_connections: int, max_queue: int | None, deadline_ms: int, threads: int,
                  onnx_threads: int, cache_size: int, batch_size: int, encoder_workers: int | None,
                  device: str, name: str | None) -> None:
    """Serve an exported model directory: /v1/rerank, /v2/rerank, /v1/encode, /v1/embed, /v2/embed,
    /healthz, /readyz, /metrics."""
    from es_plugin_bridge.serving.settings import Settings

    ctx = click.get_current_context()
    if token is None and os.environ.get("ESRERANK_TOKEN") is not None:  # click drops an empty variable
        raise UserError("ESRERANK_TOKEN is set but empty; unset it to serve without a token")
    if token_file is not None and token is not None:
        raise UserError("give the tokens once: --token (or ESRERANK_TOKEN) or --token-file (one a line)")
    settings = Settings(  # checks the tokens (and every value) before anything is loaded or announced
        model_dir=model_dir, host=host, port=port, token=token, token_file=token_file,
        expect_sha256=expect_sha256, name=name, max_documents=max_documents,
        max_body_bytes=max_body_mb * 1024 * 1024, request_timeout=request_timeout,
        max_connections=max_connections, max_queue=max_queue, deadline_ms=deadline_ms, threads=threads,
        onnx_threads=onnx_threads, cache_size=cache_size, batch_size=batch_size,
        encoder_workers=_encoder_workers(encoder_workers), device=device)  # type: ignore[arg-type]
    if token_file is not None:
        _warn_if_readable(token_file)
    if token_file is None and token is not None and (
            ctx.get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE):
        click.echo("warning: --token is visible to every user of this machine (ps); prefer --token-file "
                   "or ESRERANK_TOKEN", err=True)
    run_sidecar(settings)


def run_sidecar(settings: Settings) -> None:
    """Load, bind, announce, serve until interrupted: what ``esrerank serve`` does once its options are
    one Settings (the app and the server read that same object)."""
    from es_plugin_bridge.core.manifest import manifest_digest
    from es_plugin_bridge.serving.app import create_app
    from es_plugin_bridge.serving.server import Server

    _log_to_stderr()
    app = create_app(settings)
    server = Server.for_app(app)
    if settings.host not in ("127.0.0.1", "localhost", "::1") and not settings.guarded:
        click.echo(f"warning: serving on {settings.host} without a bearer token (--token-file)", err=True)
    click.echo(f"serving {app.extensions['esrerank'].name} on {server.url} "
               f"on {app.extensions['esrerank'].model.provider} (/v1/rerank, /v2/rerank, /v1/encode, "
               "/v1/embed, /v2/embed, /healthz, /readyz, /metrics, /openapi.json); "
               f"manifest sha256 {manifest_digest(settings.model_dir)}", err=True)
    try:
        server.run()
    finally:
        server.close()


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is now (a StreamHandler keeps the one it was made with)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(self.format(record), err=True)
        except Exception:  # a log line must never fail a request
            self.handleError(record)


def _log_to_stderr() -> None:
    """The sidecar's own log lines (rejected requests, the device chosen) on stderr, one line each."""
    logger = logging.getLogger("esrerank.sidecar")
    if not logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def main(argv: list[str] | None = None) -> None:
    """``python -m es_plugin_bridge.cli.serve MODEL_DIR ...``: the serve command alone (what a serving-only
    install needs, without importing every other subcommand)."""
    from es_plugin_bridge.cli.runner import run_command

    run_command(serve_command, argv, "esrerank serve")


if __name__ == "__main__":
    main()
