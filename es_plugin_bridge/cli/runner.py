"""Run a click command so that user mistakes end as one ``error: ...`` line, never a traceback.

Shared by ``esrerank`` and the stand-alone ``export-onnx`` script; kept apart from ``main`` so that
the latter does not import every subcommand (and their heavy libraries) just to report errors.
"""

from __future__ import annotations

import sys

import click

from es_plugin_bridge.errors import UserError


def run_command(command: click.Command, argv: list[str] | None, prog_name: str) -> None:
    """Run ``command`` on ``argv``; exit 2 on a user mistake, 130 on abort, or the command's own code."""
    try:
        code = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except FileNotFoundError as exc:
        click.echo(f"error: file not found: {exc.filename}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc}: {exc.filename}", err=True)
        sys.exit(2)
    if isinstance(code, int) and code:
        sys.exit(code)
