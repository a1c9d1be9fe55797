"""``esrerank split``: train/dev/test pairs files from one pairs file, duplicates kept within a split."""

from __future__ import annotations

from pathlib import Path

import click

from es_plugin_bridge.cli.options import seed_option


@click.command("split")
@click.argument("spec", metavar="pairs:FILE")
@click.option("--out-dir", required=True, type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--dev",
    "dev_size",
    default=2000,
    show_default=True,
    type=click.IntRange(min=1),
    help="duplicate pairs in dev.tsv",
)
@click.option(
    "--test",
    "test_size",
    default=2000,
    show_default=True,
    type=click.IntRange(min=1),
    help="duplicate pairs in test.tsv",
)
@seed_option
def split(spec: str, out_dir: Path, dev_size: int, test_size: int, seed: int) -> None:
    """Write OUT_DIR/{train,dev,test}.tsv; every question, with all its duplicates, is in one split only.

    A non-duplicate pair whose two questions land in different splits is dropped, and the count printed."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.data.split import split_by_question, write_pairs
    from es_plugin_bridge.errors import UserError

    ds = read_spec(spec)
    if not ds.pairs:
        raise UserError(f"{spec}: holds no pairs to split")
    result = split_by_question(ds.pairs, {"dev": dev_size, "test": test_size}, seed=seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, pairs in result.parts.items():
        write_pairs(pairs, out_dir / f"{name}.tsv")
        dups = sum(1 for p in pairs if p.label > 0)
        click.echo(f"{out_dir / (name + '.tsv')}: {len(pairs)} pairs ({dups} duplicates)")
    click.echo(f"dropped: {len(result.dropped)} of {len(ds.pairs)} pairs (non-duplicates whose two questions "
               "fell in different splits)")
