"""Entry point of ``esrerank``: one click group, each subcommand in its own module.

User mistakes (``UserError``, click usage errors, missing files) are printed as one line
``error: ...`` on stderr with a non-zero exit code, never as a stack trace.
"""

from __future__ import annotations

import importlib

import click

from es_plugin_bridge import __version__
from es_plugin_bridge.cli.runner import run_command


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="esrerank")
def cli() -> None:
    """Neural reranking of semantically equivalent questions, for Elasticsearch."""


def _add(module: str, command: str) -> None:
    cli.add_command(getattr(importlib.import_module(module), command))


def _register() -> None:
    # One line per subcommand; each lives in its own module (es_plugin_bridge/cli/*.py).
    _add("es_plugin_bridge.cli.evaluate", "evaluate")
    _add("es_plugin_bridge.cli.demo", "demo")
    _add("es_plugin_bridge.cli.train", "train")
    _add("es_plugin_bridge.cli.split", "split")
    _add("es_plugin_bridge.cli.export", "export_onnx_command")
    _add("es_plugin_bridge.cli.embeddings", "embeddings_command")
    _add("es_plugin_bridge.cli.serve", "serve_command")
    _add("es_plugin_bridge.cli.search", "search_command")
    _add("es_plugin_bridge.cli.es", "es_group")
    _add("es_plugin_bridge.cli.kibana", "kibana_command")


_register()


def main(argv: list[str] | None = None) -> None:
    """Run the CLI, turning user mistakes into a one-line message and a non-zero exit code."""
    run_command(cli, argv, "esrerank")


if __name__ == "__main__":
    main()
