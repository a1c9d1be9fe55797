"""Train and evaluate every model type on real data, same splits and budget; docs/results.md's results table.

Each step is an ``esrerank`` command, printed before it runs, so any row can be reproduced by hand:

1. ``esrerank split`` carves AskUbuntu train/dev/test (1,000 / 2,000 duplicate pairs held out, whole
   duplicate clusters per split) from ``train_titles.tsv``;
2. ``esrerank embeddings`` trains word2vec on the AskUbuntu training split (+ the Meta Stack
   Exchange pairs' text) and on the SemEval train and dev files (questions and comments);
3. per model type (the papers' seven, then ``transformer`` and ``cross-encoder``, which start from the
   packaged MiniLM instead of word2vec) and dataset: ``esrerank train`` (time budget per run), then
   ``esrerank evaluate``:
   AskUbuntu retrieval over every distinct title (queries = test duplicate pairs) and pair
   classification (threshold on dev), SemEval-2016 dev reranking (trained on train-part1, early
   stopping and β tuned on train-part2, so nothing reported is tuned on the data it is reported on).

Results go to ``OUT/<dataset>-<type>/`` (with ``seconds.json``: each step's wall time) and are merged
into ``benchmarks/paper_models.json`` and a Markdown table printed at the end (``--table-only``
rebuilds both from what is already there; a finished training or evaluation is kept, so a stopped run
resumes). Two runs, one per ``--datasets``, can share ``OUT``.

Usage: ``python benchmarks/paper_models.py --data ../shared/data --out runs/paper --types bow-cnn,cnn``
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

TYPES = ("bow-cnn", "cnn", "rcnn", "lstm", "gru", "siamese-lstm", "siamese-cnn")
# Every type on the same splits, protocols and budget: the papers' seven (word2vec inputs) and the two
# pretrained sub-word types (no word2vec; the cross-encoder cannot search a whole collection alone).
SUBWORD_TYPES = ("transformer", "cross-encoder")
ALL_TYPES = TYPES + SUBWORD_TYPES
HERE = Path(__file__).resolve().parent
ESRERANK = str(Path(sys.executable).with_name("esrerank"))


def run(argv: list[str], log: Path | None = None) -> float:
    """Run one command, printed first; its wall seconds."""
    print("$ esrerank " + shlex.join(argv[1:]), flush=True)
    started = time.monotonic()
    if log is None:
        subprocess.run(argv, check=True)
    else:
        with log.open("w") as fh:
            subprocess.run(argv, check=True, stdout=fh, stderr=subprocess.STDOUT)
    return time.monotonic() - started


def record_seconds(run_dir: Path, step: str, seconds: float) -> None:
    """Keep each step's wall seconds in ``run_dir/seconds.json`` (the table's time columns)."""
    path = run_dir / "seconds.json"
    times = json.loads(path.read_text()) if path.is_file() else {}
    times[step] = round(seconds, 1)
    path.write_text(json.dumps(times, indent=2, sort_keys=True) + "\n")


def askubuntu_split(data: Path, out: Path, dev: int = 1000, test: int = 2000) -> Path:
    """``esrerank split`` of ``train_titles.tsv`` into ``out/askubuntu`` (seed 1) and the
    pair-classification halves of ``val.tsv``, unless already there."""
    au = out / "askubuntu"
    if not (au / "test.tsv").is_file():
        run([ESRERANK, "split", f"pairs:{data / 'askubuntu-pairs/train_titles.tsv'}", "--out-dir", str(au),
             "--dev", str(dev), "--test", str(test), "--seed", "1"])
    if not (au / "val-test-titles.tsv").is_file():
        classification_pairs(data / "askubuntu-pairs/val.tsv", au)
    return au


def prepare(data: Path, out: Path, threads: int, datasets: str) -> dict[str, Path]:
    """The split and each dataset's word2vec, unless already there (two runs, one per dataset, can
    share ``out``)."""
    au = askubuntu_split(data, out)
    w2v_au = out / "w2v-askubuntu.txt"
    if "askubuntu" in datasets and not w2v_au.is_file():
        run(
            [
                ESRERANK,
                "embeddings",
                "--corpus",
                f"pairs:{au / 'train.tsv'}",
                "--corpus",  # not val.tsv: its pairs are the classification test
                f"pairs:{data / 'extra/meta-stackexchange-val.tsv'}",
                "--out",
                str(w2v_au),
                "--epochs",
                "20",
                "--workers",
                str(threads),
            ]
        )
    se = data / "semeval2016-task3"
    w2v_se = out / "w2v-semeval.txt"
    if "semeval" in datasets and not w2v_se.is_file():
        run(
            [
                ESRERANK,
                "embeddings",
                "--corpus",
                f"semeval:{se / 'SemEval2016-Task3-CQA-QL-train-part1-v1.1.xml'}",
                "--corpus",
                f"semeval:{se / 'SemEval2016-Task3-CQA-QL-train-part2.xml'}",
                "--corpus",
                f"semeval:{se / 'SemEval2016-Task3-CQA-QL-dev.xml'}",
                "--out",
                str(w2v_se),
                "--epochs",
                "10",
                "--workers",
                str(threads),
            ]
        )
    return {
        "titles": data / "askubuntu-pairs/train_titles.tsv",
        "au": au,
        "w2v_au": w2v_au,
        "se": se,
        "w2v_se": w2v_se,
    }


def classification_pairs(val: Path, au: Path) -> None:
    """Title pairs for pair classification, from ``val.tsv`` (balanced), minus every pair with a
    question of the training split; alternate pairs go to dev (threshold) and test.

    The held-out splits of ``esrerank split`` hold almost no non-duplicates (a random non-duplicate
    partner is nearly always a training question, so such pairs are dropped), hence this separate set.
    """
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.data.split import write_pairs
    from es_plugin_bridge.data.types import Pair, Question

    seen = {q.title.strip() for q in read_spec(f"pairs:{au / 'train.tsv'}").questions.values()}
    kept = [
        Pair(Question(p.q1.id, p.q1.title), Question(p.q2.id, p.q2.title), p.label)
        for p in read_spec(f"pairs:{val}").pairs
        if p.q1.title.strip() not in seen and p.q2.title.strip() not in seen
    ]
    write_pairs(kept[0::2], au / "val-dev-titles.tsv")
    write_pairs(kept[1::2], au / "val-test-titles.tsv")
    dups = sum(p.label for p in kept)
    print(
        f"classification pairs from {val.name}: {len(kept)} kept ({dups} duplicates) of 1000, "
        "none with a training question; halves in val-dev-titles.tsv / val-test-titles.tsv"
    )


def train_args(model_type: str, args: argparse.Namespace) -> list[str]:
    budgets = dict(item.split("=") for item in args.budgets.split(",") if item)
    extra = [
        "--epochs",
        "50",
        "--patience",
        str(args.patience),
        "--time-budget",
        budgets.get(model_type, str(args.budget)),
        "--threads",
        str(args.threads),
        "--quiet",
    ]
    if args.adam and model_type in ("bow-cnn", "cnn"):
        extra += ["--optimizer", "adam", "--lr", "0.001"]
    return extra


def train_once(
    model_type: str, run_dir: Path, train: str, dev: str, embeddings: Path, extra: list[str]
) -> Path:
    """``esrerank train`` into ``run_dir/model``, unless an earlier run already finished it."""
    model = run_dir / "model"
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (model / "config.json").is_file():
        words = ["--embeddings", str(embeddings)] if model_type in TYPES else []
        seconds = run(
            [ESRERANK, "train", "--model-type", model_type, "--train", train, "--dev", dev,
             "--out", str(model), *words, *extra],
            run_dir / "train.log",
        )
        record_seconds(run_dir, "train", seconds)
    return model


def evaluate(model: Path, run_dir: Path, task: str, *data: str) -> None:
    """``esrerank evaluate --task TASK`` of ``model``, into ``run_dir/TASK.json`` (log: ``TASK.log``),
    unless an earlier run already wrote it."""
    if (run_dir / f"{task}.json").is_file():
        return
    seconds = run(
        [
            ESRERANK,
            "evaluate",
            "--task",
            task,
            *data,
            "--model",
            str(model),
            "--json",
            str(run_dir / f"{task}.json"),
            "--no-progress",
        ],
        run_dir / f"{task}.log",
    )
    record_seconds(run_dir, task, seconds)


def classify_titles(model: Path, run_dir: Path, au: Path, rankers: str) -> None:
    """Pair classification on the ``val.tsv`` title halves: threshold on one, reported on the other."""
    evaluate(model, run_dir, "classify", "--data", f"pairs:{au / 'val-test-titles.tsv'}", "--dev",
             f"pairs:{au / 'val-dev-titles.tsv'}", "--rankers", rankers)


#: AskUbuntu dev evaluations of the sub-word types, so that one fits their budget on one core: the
#: transformer encodes every candidate of the dev windows (100 queries × 100), the cross-encoder runs
#: every (query, candidate) pair through the network (30 × 100). The papers' types evaluate them all.
DEV_QUERIES = {"transformer": 100, "cross-encoder": 30}
#: The cross-encoder reranks BM25's top 100 of a deterministic subset of the test queries (30,000 pairs
#: instead of 199,400: 1 core runs about 80 title pairs a second); its row says so.
CROSS_ENCODER_TEST_QUERIES = 300


def askubuntu(model_type: str, paths: dict[str, Path], out: Path, args: argparse.Namespace) -> None:
    au, run_dir = paths["au"], out / f"askubuntu-{model_type}"
    dev_cap = ["--max-dev-queries", str(DEV_QUERIES[model_type])] if model_type in DEV_QUERIES else []
    model = train_once(
        model_type,
        run_dir,
        f"pairs:{au / 'train.tsv'}",
        f"pairs:{au / 'dev.tsv'}",
        paths["w2v_au"],
        ["--examples-per-epoch", "3000", *dev_cap, *train_args(model_type, args)],
    )
    pairwise = model_type == "cross-encoder"  # it only rescores a window: no "model" search of a collection
    evaluate(
        model,
        run_dir,
        "retrieval",
        "--queries",
        f"pairs:{au / 'test.tsv'}",
        "--corpus",  # every distinct title, also those of pairs the split dropped
        f"pairs:{paths['titles']}",
        "--rankers",
        "bm25,lmdirichlet,fused" if pairwise else "bm25,lmdirichlet,model,fused",
        *(["--max-queries", str(CROSS_ENCODER_TEST_QUERIES)] if pairwise else []),
    )
    classify_titles(model, run_dir, au, "bm25,model")


def semeval(model_type: str, paths: dict[str, Path], out: Path, args: argparse.Namespace) -> None:
    se, run_dir = paths["se"], out / f"semeval-{model_type}"
    # Early stopping and β are tuned on train-part2, so the dev file the table
    # reports on is never tuned on (the official test file is not available here).
    model = train_once(
        model_type,
        run_dir,
        f"semeval:{se / 'SemEval2016-Task3-CQA-QL-train-part1-v1.1.xml'}",
        f"semeval:{se / 'SemEval2016-Task3-CQA-QL-train-part2.xml'}",
        paths["w2v_se"],
        train_args(model_type, args),
    )
    evaluate(
        model,
        run_dir,
        "rerank",
        "--data",
        f"semeval:{se / 'SemEval2016-Task3-CQA-QL-dev.xml'}",
        "--rankers",
        "given,bm25,lmdirichlet,model,fused",
    )


def _seconds(run_dir: Path) -> dict:
    """Wall seconds of each step of a run (``seconds.json``), and training's own count (``config.json``)."""
    path = run_dir / "seconds.json"
    times = json.loads(path.read_text()) if path.is_file() else {}
    config = run_dir / "model" / "config.json"
    if config.is_file():
        times["train_reported"] = round(json.loads(config.read_text())["train"]["seconds"], 1)
    return times


def table(out: Path) -> tuple[dict, str]:
    """Merge every run's JSON; one Markdown row per model type, with the time each took."""
    merged: dict[str, dict] = {}
    rows = [
        "| model | SemEval dev MAP (model / fused) | MRR (fused) | P@1 (fused) "
        "| AskUbuntu Acc@1 (model / fused) | Acc@5 (fused) | Acc@10 (fused) | MRR@10 (fused) "
        "| pair accuracy (model) | train s (SemEval / AskUbuntu) | evaluate s (SemEval / AskUbuntu) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    base: dict[str, str] = {}
    for model_type in ALL_TYPES:
        got = {}
        for name in ("semeval-%s/rerank", "askubuntu-%s/retrieval", "askubuntu-%s/classify"):
            path = out / f"{name % model_type}.json"
            if path.is_file():
                got[name.split("/")[1]] = json.loads(path.read_text())
        if not got:
            continue
        times = {ds: _seconds(out / f"{ds}-{model_type}") for ds in ("semeval", "askubuntu")}
        got["seconds"] = times
        merged[model_type] = got
        rr = got.get("rerank", {}).get("rankers", {})
        rt = got.get("retrieval", {}).get("rankers", {})
        cl = got.get("classify", {}).get("rankers", {})

        def f(block: dict, ranker: str, metric: str) -> str:
            return f"{block[ranker][metric]:.2f}" if ranker in block else "–"

        def s(ds: str, *steps: str, times: dict = times) -> str:
            got_steps = [times[ds][k] for k in steps if k in times[ds]]
            return f"{sum(got_steps):.0f}" if got_steps else "–"

        rows.append(
            f"| {model_type} | {f(rr, 'model', 'map')} / {f(rr, 'fused', 'map')} | {f(rr, 'fused', 'mrr')} "
            f"| {f(rr, 'fused', 'p@1')} | {f(rt, 'model', 'acc@1')} / {f(rt, 'fused', 'acc@1')} "
            f"| {f(rt, 'fused', 'acc@5')} | {f(rt, 'fused', 'acc@10')} | {f(rt, 'fused', 'mrr@10')} "
            f"| {f(cl, 'model', 'accuracy')} | {s('semeval', 'train')} / {s('askubuntu', 'train')} "
            f"| {s('semeval', 'rerank')} / {s('askubuntu', 'retrieval', 'classify')} |"
        )
        for ranker in ("given", "bm25", "lmdirichlet"):
            if ranker in rr and ranker not in base:
                base[ranker] = (
                    f"| {ranker} | {f(rr, ranker, 'map')} | {f(rr, ranker, 'mrr')} | {f(rr, ranker, 'p@1')} "
                    f"| {f(rt, ranker, 'acc@1')} | {f(rt, ranker, 'acc@5')} | {f(rt, ranker, 'acc@10')} "
                    f"| {f(rt, ranker, 'mrr@10')} | {f(cl, ranker, 'accuracy')} | – | – |"
                )
    return merged, "\n".join(rows[:2] + list(base.values()) + rows[2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=HERE.parent / "runs" / "paper")
    parser.add_argument("--types", default=",".join(ALL_TYPES))
    parser.add_argument("--datasets", default="askubuntu,semeval")
    parser.add_argument("--budget", type=int, default=300, help="training seconds per run")
    parser.add_argument("--budgets", default="", help="per-type budgets, e.g. bow-cnn=900,cnn=600")
    parser.add_argument("--patience", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--adam", action="store_true", help="bow-cnn/cnn with Adam 1e-3 instead of the paper's SGD"
    )
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        paths = prepare(args.data, args.out, args.threads, args.datasets)
        for model_type in args.types.split(","):
            if model_type not in ALL_TYPES:
                parser.error(f"unknown model type {model_type!r}")
            if "askubuntu" in args.datasets:
                askubuntu(model_type, paths, args.out, args)
            if "semeval" in args.datasets:
                semeval(model_type, paths, args.out, args)
    merged, markdown = table(args.out)
    (HERE / "paper_models.json").write_text(
        json.dumps({"command": shlex.join(sys.argv), "results": merged}, indent=2, sort_keys=True) + "\n"
    )
    (HERE / "paper_models.md").write_text(markdown + "\n")
    print(markdown)


if __name__ == "__main__":
    main()
