"""``esrerank embed SPEC... --model DIR --out FILE``: each question's vector and terms, computed once in
process (``elastic/embed_once.py``) into a vectors file that ``es index --vectors`` stores without the
sidecar (docs/elasticsearch.md, "Embed once, index many times")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click


@click.command("embed", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("specs", nargs=-1, required=True, metavar="SPEC...")
@click.option("--model", "model_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="The export-onnx model directory the index was set up with.")
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The vectors file to write (gzip'd NDJSON; written under a temporary name, then renamed).")
@click.option("--batch-size", default=256, show_default=True, type=click.IntRange(1, 1000))
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where onnxruntime encodes, as esrerank serve --device.")
@click.option("--onnx-threads", default=None, type=click.IntRange(min=1),
              help="onnxruntime's intra-op threads (default: its own choice, every core).")
@click.option("--skip-bad", is_flag=True, help="Skip malformed records of the data (counted).")
@click.option("--no-progress", is_flag=True)
def embed_command(specs: tuple[str, ...], model_dir: Path, out_file: Path, batch_size: int, device: str,
                  onnx_threads: int | None, skip_bad: bool, no_progress: bool) -> None:
    """Write the vector and BOW terms of every question of SPEC (FORMAT:PATH, repeatable) to --out, as the
    sidecar's /v1/encode answers them, for `esrerank es index SPEC --vectors FILE`."""
    from es_plugin_bridge.cli.es import read_questions
    from es_plugin_bridge.elastic.embed_once import embed_to_file

    questions: dict[str, Any] = read_questions(specs, skip_bad)
    report = embed_to_file(list(questions.values()), model_dir, out_file, batch_size=batch_size,
                           device=device, threads=onnx_threads, progress=not no_progress)
    for line in report.lines(out_file):
        click.echo(line)
    if report.refused:
        click.echo(f"error: {len(report.refused)} questions were not embedded (listed above); es index "
                   "--vectors fails each of them alone", err=True)
        sys.exit(1)
