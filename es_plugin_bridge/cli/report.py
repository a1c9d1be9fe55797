"""``esrerank report RUN [RUN ...] --out report.html``: one review page from the runs' bundles.

Each RUN is an ``evaluate --report DIR`` directory (its ``review.json``) or that JSON file; the first run
is the reference, later runs are paired with it only when their query set and judgments are the same
(else the page says so in one line and leaves them out).
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The HTML file to write (self-contained).")
@click.option("--label", "labels", multiple=True, metavar="NAME",
              help="A name per run, in order (default: each run's directory name).")
@click.option("--title", default="", help="The page's title.")
def report_command(runs: tuple[Path, ...], out: Path, labels: tuple[str, ...], title: str) -> None:
    """Join evaluation runs into one self-contained review page."""
    from es_plugin_bridge.errors import UserError
    from es_plugin_bridge.evaluation.review_data import join, read_bundle
    from es_plugin_bridge.evaluation.review_page import write_page

    if labels and len(labels) != len(runs):
        raise UserError(f"--label: {len(labels)} names for {len(runs)} runs")
    bundles = []
    for i, run in enumerate(runs):
        data = read_bundle(run)
        default = (run.name if run.is_dir() else run.parent.name) or f"run{i + 1}"
        data["label"] = labels[i] if labels else default
        bundles.append(data)
    data = join(bundles)
    path = write_page(data, out, title)
    for line in data["refusals"]:
        click.echo(f"refused: {line}")
    click.echo(f"wrote {path}")
