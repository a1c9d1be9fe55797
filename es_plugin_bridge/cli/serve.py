"""``esrerank serve MODEL_DIR``: the sidecar (Flask app on waitress), bound to 127.0.0.1 by default."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("serve", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model_dir", metavar="MODEL_DIR", type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback exposes the model to the network.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--token", envvar="ESRERANK_TOKEN", default=None,
              help="Bearer token required on every endpoint but /healthz and /readyz "
                   "(or set ESRERANK_TOKEN).")
@click.option("--max-documents", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Most documents (or texts) one request may carry.")
@click.option("--threads", default=4, show_default=True, type=click.IntRange(min=1),
              help="Request threads (waitress).")
@click.option("--onnx-threads", default=None, type=click.IntRange(min=1),
              help="onnxruntime intra-op threads per request (default: onnxruntime's).")
@click.option("--name", default=None, help="Model name reported in responses (default TYPE:DIR).")
def serve_command(model_dir: Path, host: str, port: int, token: str | None, max_documents: int,
                  threads: int, onnx_threads: int | None, name: str | None) -> None:
    """Serve an exported model directory: /v1/rerank, /v1/embed, /healthz, /readyz, /metrics."""
    import waitress

    from es_plugin_bridge.serving.app import create_app
    from es_plugin_bridge.serving.model_dir import ModelDirectory

    model = ModelDirectory.load(model_dir, threads=onnx_threads)
    app = create_app(model, token=token, name=name, max_documents=max_documents)
    if host not in ("127.0.0.1", "localhost", "::1") and not token:
        click.echo(f"warning: serving on {host} without a bearer token (--token)", err=True)
    click.echo(f"serving {app.extensions['esrerank'].name} on http://{host}:{port} "
               "(/v1/rerank, /v1/embed, /healthz, /readyz, /metrics, /openapi.json)", err=True)
    waitress.serve(app, host=host, port=port, threads=threads, ident="esrerank")
