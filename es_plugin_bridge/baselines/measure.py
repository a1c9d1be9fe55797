"""Measure the Bogdanova et al. baselines on labelled pairs: ``python -m es_plugin_bridge.baselines.measure``.

Protocol (pair classification, as in the paper): the pairs are shuffled with a seed and cut into a
test part, a dev part and the rest for training. Each baseline's threshold is the
accuracy-maximising one on the dev pairs; accuracy is reported on the test pairs. Jaccard needs no
training; the SVM is fitted on the training rest (optionally subsampled with ``--svm-max-train``).
"""

from __future__ import annotations

import json
import sys
import time
from importlib import resources

import click
import numpy as np

from es_plugin_bridge.baselines.base import accuracy, best_threshold
from es_plugin_bridge.baselines.jaccard import JaccardScorer
from es_plugin_bridge.baselines.svm import SvmScorer
from es_plugin_bridge.errors import UserError

DEFAULT_DATA = f"pairs:{resources.files('es_plugin_bridge') / 'samples/askubuntu-pairs/train_titles.tsv'}"


def split(n: int, test: int, dev: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded (test, dev, train) index arrays; train is what the other two leave."""
    if test + dev >= n:
        raise UserError(f"--test-size + --dev-size ({test + dev}) must be below the number of pairs ({n})")
    perm = np.random.default_rng(seed).permutation(n)
    return perm[:test], perm[test : test + dev], perm[test + dev :]


@click.command()
@click.option("--data", default=DEFAULT_DATA, show_default=True, help="Labelled pairs, FORMAT:PATH.")
@click.option("--test-size", default=4000, show_default=True, type=click.IntRange(min=1))
@click.option("--dev-size", default=4000, show_default=True, type=click.IntRange(min=1))
@click.option("--seed", default=1, show_default=True, type=int)
@click.option("--svm/--no-svm", "run_svm", default=True, show_default=True)
@click.option(
    "--svm-max-train", type=click.IntRange(min=2), default=None, help="Subsample SVM training pairs."
)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None)
@click.option(
    "--save-svm",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the fitted SVM here (svm.json + svm.safetensors) for the evaluator's svm ranker.",
)
def main(
    data: str,
    test_size: int,
    dev_size: int,
    seed: int,
    run_svm: bool,
    svm_max_train: int | None,
    json_out: str | None,
    save_svm: str | None,
) -> None:
    """Jaccard (shingle sizes 1-4) and SVM pair accuracy with a dev-tuned threshold."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.text import Preprocessor, TextOptions

    pre = Preprocessor(TextOptions(code="remove"))  # the paper removes code: its best setting
    ds = read_spec(data)
    pairs = [(pre.tokens(p.q1), pre.tokens(p.q2)) for p in ds.pairs]
    y = np.array([p.label for p in ds.pairs])
    test, dev, train = split(len(pairs), test_size, dev_size, seed)

    def pick(idx: np.ndarray) -> list:
        return [pairs[i] for i in idx]

    results: dict = {"data": data, "seed": seed, "test": len(test), "dev": len(dev), "train": len(train)}
    for n in (1, 2, 3, 4):
        scorer = JaccardScorer(n)
        scorer.fit(pick(dev), y[dev])
        acc = accuracy(scorer.score(pick(test)), y[test], scorer.threshold)
        results[f"jaccard{n}"] = {
            "threshold": scorer.threshold,
            "dev_accuracy": scorer.train_accuracy,
            "test_accuracy": acc,
        }
        click.echo(f"jaccard n={n}: threshold {scorer.threshold:.4f}  test accuracy {100 * acc:.2f}%")
    if run_svm:
        svm = SvmScorer(max_train=svm_max_train, seed=seed)
        started = time.perf_counter()
        svm.fit(pick(train), y[train])
        fit_seconds = time.perf_counter() - started
        if save_svm:
            svm.save(save_svm)
        threshold, dev_acc = best_threshold(svm.score(pick(dev)), y[dev])
        test_scores = svm.score(pick(test))
        acc = accuracy(test_scores, y[test], threshold)
        results["svm"] = {
            "threshold": threshold,
            "dev_accuracy": dev_acc,
            "test_accuracy": acc,
            "test_accuracy_at_0": accuracy(test_scores, y[test], 0.0),
            "train_pairs": svm.n_train,
            "ngrams": svm.featurizer.n_ngrams,
            "fit_seconds": round(fit_seconds, 1),
        }
        click.echo(
            f"svm ({svm.n_train} training pairs, {svm.featurizer.n_ngrams} n-grams, fit {fit_seconds:.0f}s): "
            f"threshold {threshold:.3f}  test accuracy {100 * acc:.2f}%"
        )
    if json_out:
        with open(json_out, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)
            fh.write("\n")


if __name__ == "__main__":
    try:
        main(standalone_mode=False)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
