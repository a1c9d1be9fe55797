"""Console script ``export-onnx``: the command of ``esrerank export-onnx``, with the same error handling."""

from __future__ import annotations

from es_plugin_bridge.cli.runner import run_command


def main(argv: list[str] | None = None) -> None:
    """Run ``export-onnx``; user mistakes print one ``error: ...`` line and exit 2, never a traceback."""
    from es_plugin_bridge.cli.export import export_onnx_command

    run_command(export_onnx_command, argv, "export-onnx")


if __name__ == "__main__":
    main()
