"""Entry point of ``esrerank``: one click group, each subcommand in its own module.

User mistakes (``UserError``) are printed as one line on stderr with exit code 2, never as a
stack trace.
"""

from __future__ import annotations

import sys

import click

from es_plugin_bridge import __version__
from es_plugin_bridge.errors import UserError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="esrerank")
def cli() -> None:
    """Neural reranking of semantically equivalent questions, for Elasticsearch."""


def _register() -> None:
    # Subcommands are registered here, one module each (see es_plugin_bridge/cli/*.py).
    pass


_register()


def main(argv: list[str] | None = None) -> None:
    """Run the CLI, turning UserError into a one-line message and exit code 2."""
    try:
        cli.main(args=argv, prog_name="esrerank", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except FileNotFoundError as exc:
        click.echo(f"error: file not found: {exc.filename}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
