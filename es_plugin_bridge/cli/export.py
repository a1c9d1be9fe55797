"""``esrerank export-onnx CHECKPOINT_DIR --out MODEL_DIR`` (also installed alone as ``export-onnx``)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("export-onnx", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("checkpoint", metavar="CHECKPOINT_DIR", type=click.Path(path_type=Path))
@click.option("--out", required=True, metavar="MODEL_DIR", type=click.Path(path_type=Path),
              help="Model directory to write (atomically).")
@click.option("--force", is_flag=True, help="Replace a non-empty --out directory.")
@click.option("--verify-data", "verify_specs", multiple=True, metavar="SPEC",
              help="FORMAT:PATH of real questions to compare ONNX with torch on (default: shipped samples).")
@click.option("--verify-questions", default=64, show_default=True, type=click.IntRange(min=1),
              help="How many questions to verify with.")
@click.option("--tolerance", default=1e-4, show_default=True, type=click.FloatRange(min=0.0),
              help="Largest |onnxruntime − torch| accepted; a larger difference aborts the export.")
@click.option("--quantize", type=click.Choice(["int8"]),
              help="Replace the verified graph by onnxruntime's dynamic int8 quantisation (smaller, faster; "
                   "served one text per run, so a text's vector never depends on its batch).")
@click.option("--int8-tolerance", default=0.05, show_default=True, type=click.FloatRange(min=0.0),
              help="With --quantize: largest 1 − cosine(int8 vector, torch vector) accepted on the "
                   "verification questions (quantisation error).")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="torch threads (default: torch's).")
@click.option("--quiet", is_flag=True, help="Print nothing on success.")
def export_onnx_command(
    checkpoint: Path,
    out: Path,
    force: bool,
    verify_specs: tuple[str, ...],
    verify_questions: int,
    tolerance: float,
    quantize: str | None,
    int8_tolerance: float,
    threads: int | None,
    quiet: bool,
) -> None:
    """Export a checkpoint written by `esrerank train` to a verified ONNX model directory."""
    import torch

    from exporters.export import export_checkpoint

    if threads:
        torch.set_num_threads(threads)
    result = export_checkpoint(
        checkpoint, out, force=force, verify_specs=verify_specs or None, tolerance=tolerance,
        max_questions=verify_questions, quantize=quantize, int8_tolerance=int8_tolerance,
    )
    if not quiet:
        lengths = "dynamic lengths" if result.dynamic_length else "fixed padded lengths"
        if result.quantized:
            lengths += f", {result.quantized} quantised"
        click.echo(
            f"exported {result.model_type} to {result.out} in {result.seconds:.1f} s ({lengths}; "
            f"max |onnxruntime - torch| vectors {result.max_abs_diff:.2g}, "
            f"scores {result.score_max_abs_diff:.2g})"
        )
        for name, size in result.files.items():
            click.echo(f"  {name:20s} {size:>12,d} bytes")


def main(argv: list[str] | None = None) -> None:
    """Console script ``export-onnx``: the same command and error handling as ``esrerank export-onnx``
    (user mistakes print one ``error: ...`` line and exit 2, never a traceback)."""
    from es_plugin_bridge.cli.runner import run_command

    run_command(export_onnx_command, argv, "export-onnx")


if __name__ == "__main__":
    main()
