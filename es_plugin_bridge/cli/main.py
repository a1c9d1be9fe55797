"""Entry point of ``esrerank``: one click group, each subcommand in its own module.

User mistakes (``UserError``, click usage errors, missing files) are printed as one line
``error: ...`` on stderr with a non-zero exit code, never as a stack trace.
"""

from __future__ import annotations

import importlib

import click

from es_plugin_bridge import __version__
from es_plugin_bridge.cli.runner import run_command
from es_plugin_bridge.errors import UserError

#: Subcommand name -> (module, attribute). A subcommand's module is imported only when that command runs
#: (or for its --help), so `esrerank serve` works on the serving-only base install and a command's heavy
#: libraries load only for it.
COMMANDS: dict[str, tuple[str, str]] = {
    "evaluate": ("es_plugin_bridge.cli.evaluate", "evaluate"),
    "demo": ("es_plugin_bridge.cli.demo", "demo"),
    "train": ("es_plugin_bridge.cli.train", "train"),
    "pretrain": ("es_plugin_bridge.cli.pretrain", "pretrain"),
    "split": ("es_plugin_bridge.cli.split", "split"),
    "export-onnx": ("es_plugin_bridge.cli.export", "export_onnx_command"),
    "fit-hybrid": ("es_plugin_bridge.cli.fit_hybrid", "fit_hybrid_command"),
    "embeddings": ("es_plugin_bridge.cli.embeddings", "embeddings_command"),
    "embed": ("es_plugin_bridge.cli.embed", "embed_command"),
    "serve": ("es_plugin_bridge.cli.serve", "serve_command"),
    "search": ("es_plugin_bridge.cli.search", "search_command"),
    "es": ("es_plugin_bridge.cli.es", "es_group"),
    "kibana": ("es_plugin_bridge.cli.kibana", "kibana_command"),
    "report": ("es_plugin_bridge.cli.report", "report_command"),
}


class LazyGroup(click.Group):
    """A click group that imports each subcommand's module on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr = COMMANDS[cmd_name]
        try:
            return getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:  # the serving-only install lacks this command's libraries
            missing = exc.name or "a dependency"
            return click.Command(cmd_name, help=f"(unavailable: {missing} is not installed)",
                                 callback=lambda **_: _missing(cmd_name, missing),
                                 context_settings={"ignore_unknown_options": True, "allow_extra_args": True})


def _missing(command: str, module: str) -> None:
    raise UserError(f"`esrerank {command}` needs {module}, which this install lacks: "
                    "pip install 'es-plugin-bridge[train]' (or '[elastic]' for the es and kibana commands)")


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="esrerank")
def cli() -> None:
    """Neural reranking of semantically equivalent questions, for Elasticsearch."""


def main(argv: list[str] | None = None) -> None:
    """Run the CLI, turning user mistakes into a one-line message and a non-zero exit code."""
    run_command(cli, argv, "esrerank")


if __name__ == "__main__":
    main()
