"""In-domain pre-training (``esrerank pretrain``, TSDAE) before fine-tuning the transformer: with against
without, on the splits, budget and protocols of ``benchmarks/paper_models.py``'s table.

Every step is an ``esrerank`` command printed before it runs:

1. ``esrerank pretrain`` on the unlabelled text of the training data only (SemEval: the questions and
   comments of train-part1 and train-part2; AskUbuntu: the titles of the split's ``train.tsv`` and the
   Meta Stack Exchange pairs, as the word2vec of the table), for ``--pretrain-budget`` seconds;
2. ``esrerank train --model-type transformer --init <pre-trained>`` with the table's arguments
   (``--time-budget``, patience 4, one thread), and ``--epochs 0`` (TSDAE alone, β fit on dev);
3. the table's evaluations (SemEval-2016 dev file; AskUbuntu retrieval over every title and pair
   accuracy).

"without" is the table's own ``transformer`` row (``runs/paper/<dataset>-transformer``), trained with the
same arguments from the packaged MiniLM. Usage: ``python benchmarks/domain_pretrain.py [--datasets
semeval,askubuntu] [--pretrain-budget 600] [--budget 240]`` → ``benchmarks/domain_pretrain.json``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine  # noqa: E402
from paper_models import (  # noqa: E402
    DEV_QUERIES,
    ESRERANK,
    HERE,
    _seconds,
    askubuntu_split,
    classify_titles,
    evaluate,
    record_seconds,
    run,
)

SE = "SemEval2016-Task3-CQA-QL-{}.xml"


def pretrain(corpora: list[str], out: Path, budget: int, threads: int) -> Path:
    """``esrerank pretrain`` into ``out`` unless it is there."""
    if not (out / "config.json").is_file():
        argv = [ESRERANK, "pretrain", *[x for c in corpora for x in ("--corpus", c)], "--out", str(out),
                "--time-budget", str(budget), "--threads", str(threads), "--quiet"]
        seconds = run(argv, out.parent / f"{out.name}.log")
        record_seconds(out.parent, f"pretrain-{out.name}", seconds)
    return out


def train(init: Path | None, run_dir: Path, train_spec: str, dev_spec: str, extra: list[str]) -> Path:
    """``esrerank train --model-type transformer`` from ``init`` (None: the packaged MiniLM)."""
    model = run_dir / "model"
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (model / "config.json").is_file():
        start = ["--init", str(init)] if init is not None else []
        seconds = run([ESRERANK, "train", "--model-type", "transformer", *start, "--train",
                       train_spec, "--dev", dev_spec, "--out", str(model), *extra], run_dir / "train.log")
        record_seconds(run_dir, "train", seconds)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=HERE.parent / "runs" / "paper")
    parser.add_argument("--datasets", default="semeval,askubuntu")
    parser.add_argument("--pretrain-budget", type=int, default=600)
    parser.add_argument("--budget", type=int, default=None, help="fine-tuning seconds (default: the table's, "
                        "240 on SemEval, 300 on AskUbuntu)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    pre_dir = args.out / "pretrained"
    pre_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    se = args.data / "semeval2016-task3"
    for dataset in args.datasets.split(","):
        if dataset == "semeval":
            part1 = f"semeval:{se / SE.format('train-part1-v1.1')}"
            part2 = f"semeval:{se / SE.format('train-part2')}"
            corpora, train_spec, dev_spec = [part1, part2], part1, part2
            budget = args.budget or 240
        elif dataset == "askubuntu":
            au = askubuntu_split(args.data, args.out)
            corpora = [f"pairs:{au / 'train.tsv'}", f"pairs:{args.data / 'extra/meta-stackexchange-val.tsv'}"]
            train_spec, dev_spec = f"pairs:{au / 'train.tsv'}", f"pairs:{au / 'dev.tsv'}"
            budget = args.budget or 300
        else:
            parser.error(f"unknown dataset {dataset!r}")
        init = pretrain(corpora, pre_dir / f"{dataset}-tsdae", args.pretrain_budget, args.threads)
        common = ["--patience", "4", "--threads", str(args.threads), "--quiet"]
        if dataset == "askubuntu":  # the table's transformer arguments
            common += ["--examples-per-epoch", "3000", "--max-dev-queries", str(DEV_QUERIES["transformer"])]
        # "fine-tuned" without pre-training is the table's transformer row (the same arguments);
        # "as it comes" is MiniLM with β fit on dev, as "tsdae only" is the pre-trained encoder.
        variants = {"tsdae+fine-tuned": (init, ["--epochs", "50", "--time-budget", str(budget), *common]),
                    "tsdae only": (init, ["--epochs", "0", *common]),
                    "as it comes": (None, ["--epochs", "0", *common])}
        got: dict[str, dict] = {}
        for name, (start, extra) in variants.items():
            run_dir = args.out / f"{dataset}-transformer-{name.replace(' ', '-').replace('+', '-')}"
            model = train(start, run_dir, train_spec, dev_spec, extra)
            if dataset == "semeval":
                evaluate(model, run_dir, "rerank", "--data", f"semeval:{se / SE.format('dev')}", "--rankers",
                         "model,fused")
                tasks = ["rerank"]
            else:
                titles = args.data / "askubuntu-pairs/train_titles.tsv"
                evaluate(model, run_dir, "retrieval", "--queries", f"pairs:{au / 'test.tsv'}", "--corpus",
                         f"pairs:{titles}", "--rankers", "model,fused")
                classify_titles(model, run_dir, au, "model")
                tasks = ["retrieval", "classify"]
            got[name] = {t: json.loads((run_dir / f"{t}.json").read_text())["rankers"] for t in tasks}
            got[name]["seconds"] = _seconds(run_dir)
            trained = json.loads((model / "config.json").read_text())["train"]
            got[name]["best_epoch"] = trained["best_epoch"]
            got[name]["dev_map"] = round(100 * trained["best_dev_map"], 2)  # the tuning dev the split gives
        summary = json.loads((init / "pretrain.json").read_text())
        results[dataset] = {
            "command": "python benchmarks/domain_pretrain.py " + shlex.join(sys.argv[1:]),
            "pretrain": {k: summary[k] for k in ("steps", "texts_seen", "epochs", "seconds", "device",
                                                  "corpus")},
            **got,
        }
    out = HERE / "domain_pretrain.json"
    previous = json.loads(out.read_text()) if out.is_file() else {}
    merged = {**previous.get("results", {}), **results}
    out.write_text(json.dumps({"machine": machine(), "results": merged}, indent=2) + "\n")
    print(json.dumps(merged, indent=1)[:3000])


if __name__ == "__main__":
    main()
