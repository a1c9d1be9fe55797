"""``esrerank fit-hybrid MODEL_DIR --dev SPEC --corpus SPEC...``: fit the learned hybrid on the site's
collection and record it in the exported model directory (``exporters/hybrid_refit.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from es_plugin_bridge.cli.options import seed_option


@click.command("fit-hybrid")
@click.argument("model_dir", metavar="MODEL_DIR", type=click.Path(path_type=Path))
@click.option("--dev", "dev_specs", required=True, multiple=True, metavar="SPEC",
              help="Duplicate pairs to fit on (held out from training; the test pairs never).")
@click.option("--corpus", "corpus_specs", multiple=True, metavar="SPEC",
              help="The collection searched: every question of the index the model will serve.")
@click.option("--first-stage", default="bm25", show_default=True, type=click.Choice(["bm25", "lmdirichlet"]))
@click.option("--json", "json_out", type=click.Path(path_type=Path), help="Also write the fit's report here.")
@seed_option
def fit_hybrid_command(model_dir: Path, dev_specs: tuple[str, ...], corpus_specs: tuple[str, ...],
                       first_stage: str, json_out: Path | None, seed: int) -> None:
    """Choose the normalisation, combination, weights and window on --dev (5-fold cross-validation; the
    fusion is kept only where it beats both clauses alone on the held-out folds) and write it into
    MODEL_DIR's config.json, which es setup turns into the engine's search pipeline."""
    from es_plugin_bridge.data.spec import read_spec
    from exporters.hybrid_refit import refit_hybrid

    dev = [read_spec(spec) for spec in dev_specs]
    corpus = [q for spec in corpus_specs for q in read_spec(spec).questions.values()]
    fusion, report = refit_hybrid(model_dir, dev, corpus, first_stage=first_stage, seed=seed)
    held = report["held_out"]
    click.echo(f"{report['queries']} dev queries among {report['collection']} questions, held-out MRR@10: "
               f"fusion {held['fusion']}, first stage alone {held['first_stage alone']}, "
               f"dense alone {held['dense alone']}")
    click.echo(f"{report['chosen']}")
    click.echo(f"recorded in {model_dir / 'config.json'}: {fusion.describe()}")
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
