"""Console script ``export-onnx``: the command of ``esrerank export-onnx``, with the same error handling."""

from __future__ import annotations

import sys

import click

from es_plugin_bridge.errors import UserError


def main(argv: list[str] | None = None) -> None:
    """Run ``export-onnx``; user mistakes print one ``error: ...`` line and exit 2, never a traceback."""
    from es_plugin_bridge.cli.export import export_onnx_command

    try:
        export_onnx_command.main(args=argv, prog_name="export-onnx", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(exc.exit_code)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"error: {exc.strerror or exc}: {exc.filename}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
