"""Training benchmark: throughput of every model type, BOW-CNN time-to-best, RCNN pre-training.

Everything runs through the product's own code on real AskUbuntu data:

1. **Throughput per model type** (default run): a ``Trainer`` is built for each model type with
   the type's default recipe (``recipe_for``: ``--recipe best``, word2vec at init included) and
   paper-size hyper-parameter defaults on the train part of an AskUbuntu split of
   ``train_titles.tsv``; then the recipe's objective's loss (``training.objectives``: ranking, MSE,
   or in-batch for the transformer) + backward + clipping + optimiser step is
   timed for ``--steps`` steps after 2 warm-up steps (fewer when ``--max-seconds`` runs out, at
   least 3). An *example* is a positive pair with its sampled negatives (ranking losses; for the
   in-batch loss the batch's other duplicates) or a labelled pair (MSE); *questions* counts
   the distinct questions each step encodes. Token ids are cached for every question first
   (as they are after a real run's first epoch). Inference: questions encoded per second in eval
   mode under ``torch.no_grad``, batches of 256.
2. **BOW-CNN time to its best AskUbuntu dev score** (``--full`` only): ``Trainer.run`` for
   bow-cnn on the split (dev 1,000 / test 2,000 duplicate pairs, seed 1) with a 600 s budget and
   3,000 examples per epoch; reports when the best dev epoch finished (its history row's
   ``seconds``, counted from the Trainer's construction) and its dev MAP.
3. **RCNN pre-training** (Lei et al. 4.2): questions per second of ``TitleDecoder.question_loss``
   + backward + clipping + Adam step, on questions with bodies (``val.tsv``) and on the 50,000-
   question pre-training corpus (``val.tsv`` questions with bodies, AskUbuntu titles, then Quora
   questions when ``../shared`` has them), with the projected time of one epoch over 50,000
   questions. With ``--full``, ``Trainer.pretrain`` really runs one epoch over that corpus with a
   1,200 s budget and the report says whether the epoch fits.

Usage::

    python benchmarks/training.py [--threads 2] [--steps 10] [--full] [--out benchmarks/training.json]
    python benchmarks/training.py --device cuda --models transformer --out benchmarks/training_gpu.json

``--device`` is ``esrerank train``'s (``training.device``): each row names the device it ran on. Asked
for ``cuda`` where torch sees no GPU, the script writes a report saying so (``measured: false``, with
the reason) instead of a figure, so ``benchmarks/`` says which GPU figure exists and which does not.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from _machine import load_average, machine  # benchmarks/ is on sys.path when run as a script
from tqdm import tqdm

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.split import split_by_question, write_pairs
from es_plugin_bridge.data.types import Dataset, Pair, Question
from es_plugin_bridge.models import ALL_TYPES, TitleDecoder
from es_plugin_bridge.training.recipes import make_optimizer
from es_plugin_bridge.training.trainer import TrainConfig, Trainer

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs"
SHARED = ROOT.parent / "shared" / "data"
TITLES = SAMPLES / "train_titles.tsv"
QUORA = SHARED / "extra" / "quora-pairs-train.tsv"
SPLIT_SIZES = {"dev": 1000, "test": 2000}
BOW_CNN_BUDGET_S = 600.0
BOW_CNN_EXAMPLES_PER_EPOCH = 3000
PRETRAIN_QUESTIONS = 50_000
PRETRAIN_BUDGET_S = 1200.0
PRETRAIN_BATCH = 64  # as Trainer.pretrain
PRETRAIN_VOCAB = 20_000  # output softmax size, as Trainer.pretrain
INFERENCE_BATCH = 256
WARMUP_STEPS = 2
MIN_TIMED_STEPS = 3


def val_path() -> Path:
    """AskUbuntu val pairs (title + HTML body): ``../shared`` copy, else the shipped identical sample."""
    shared = SHARED / "askubuntu-pairs" / "val.tsv"
    return shared if shared.is_file() else SAMPLES / "val.tsv"


# -- data -----------------------------------------------------------------------------------------
def askubuntu_split(out_dir: Path) -> tuple[Path, Path]:
    """Split ``train_titles.tsv`` as the issue's AskUbuntu dev protocol does; (train.tsv, dev.tsv)."""
    ds = read_spec(f"pairs:{TITLES}")
    result = split_by_question(ds.pairs, dict(SPLIT_SIZES), seed=1)
    parts = result.parts
    print(f"split: dropped {len(result.dropped)} non-duplicate pairs whose questions are in two splits")
    for name, pairs in parts.items():
        write_pairs(pairs, out_dir / f"{name}.tsv")
    return out_dir / "train.tsv", out_dir / "dev.tsv"


def small_dev(dev: Dataset, pairs: int = 300) -> Dataset:
    """A few dev pairs: a Trainer needs dev queries, the throughput runs never score them."""
    return Dataset(f"{dev.name} (first {pairs} pairs)", pairs=dev.pairs[:pairs])


def pretrain_corpus(limit: int) -> tuple[Dataset, dict[str, int]]:
    """Up to ``limit`` distinct questions as pairs: val.tsv (with bodies), AskUbuntu titles, Quora."""
    sources = [("askubuntu val.tsv (title + body)", val_path()), ("askubuntu train_titles.tsv", TITLES)]
    if QUORA.is_file():
        sources.append(("quora-pairs-train.tsv", QUORA))
    seen: set[str] = set()
    pairs: list[Pair] = []
    counts: dict[str, int] = {}
    for name, path in sources:
        before = len(seen)
        for pair in read_spec(f"pairs:{path}").pairs:
            new = {pair.q1.id, pair.q2.id} - seen
            if len(seen) + len(new) > limit:
                break
            seen |= new
            pairs.append(pair)
        counts[name] = len(seen) - before
    return Dataset("pre-training corpus", pairs=pairs), counts


# -- timing helpers -------------------------------------------------------------------------------
def timed_steps(
    step: Callable[[int], float], steps: int, max_seconds: float, desc: str
) -> tuple[list[float], list[float]]:
    """Run ``step(i)`` for 2 warm-up + up to ``steps`` timed calls; (seconds per call, step values)."""
    for i in range(WARMUP_STEPS):
        step(i)
    seconds: list[float] = []
    values: list[float] = []
    bar = tqdm(range(steps), desc=desc, leave=False)
    started = time.perf_counter()
    for i in bar:
        t0 = time.perf_counter()
        values.append(step(WARMUP_STEPS + i))
        seconds.append(time.perf_counter() - t0)
        bar.set_postfix(s_per_step=f"{seconds[-1]:.2f}")
        if len(seconds) >= MIN_TIMED_STEPS and time.perf_counter() - started > max_seconds:
            break
    bar.close()
    return seconds, values


def count_encoded(trainer: Trainer) -> list[int]:
    """Record how many distinct questions each ``Trainer.encode`` call encodes (instance-level wrap)."""
    counts: list[int] = []
    original = trainer.encode

    def wrapped(questions: Sequence[Question]) -> Any:
        encoded, where = original(questions)
        counts.append(len(where))
        return encoded, where

    trainer.encode = wrapped  # type: ignore[method-assign]
    return counts


# -- 1. throughput per model type -------------------------------------------------------------------
def model_throughput(
    model_type: str, train: Dataset, dev: Dataset, args: argparse.Namespace, out_dir: Path
) -> dict[str, Any]:
    cfg = TrainConfig(model_type=model_type, seed=1, show_progress=False, max_dev_queries=50,
                      device=args.device)
    t0 = time.perf_counter()
    trainer = Trainer(cfg, [train], [dev], out_dir / model_type)
    init_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for question in trainer.data.questions.values():
        trainer.featurizer.ids(question)
    featurize_s = time.perf_counter() - t0
    recipe = trainer.recipe
    model = trainer.model
    optimizer = make_optimizer(recipe, model.parameters())
    objective = trainer.objective
    examples = trainer._epoch_examples()
    size = recipe.batch_size
    encoded_counts = count_encoded(trainer)
    model.train()

    def step(i: int) -> float:
        start = (i * size) % max(len(examples) - size, 1)
        loss = objective.loss(examples[start : start + size], trainer)
        optimizer.zero_grad()
        loss.backward()
        if recipe.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.clip)
        optimizer.step()
        return float(loss.item())

    seconds, losses = timed_steps(step, args.steps, args.max_seconds, f"train {model_type}")
    timed_questions = encoded_counts[WARMUP_STEPS : WARMUP_STEPS + len(seconds)]
    total = sum(seconds)
    row: dict[str, Any] = {
        "device": trainer.device_name(),
        "recipe": asdict(recipe),
        "hyper": model.hyper.model_dump(mode="json"),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocabulary": len(trainer.featurizer.vocab),
        "trainer_init_s": round(init_s, 3),
        "featurize_all_questions_s": round(featurize_s, 3),
        "example": {"mse": "labelled pair", "in-batch": f"positive, {size - 1} in-batch negatives"
                    }.get(recipe.loss, f"positive + {recipe.negatives} negatives"),
        "timed_steps": len(seconds),
        "seconds_per_step": round(total / len(seconds), 4),
        "examples_per_s": round(size * len(seconds) / total, 2),
        "train_questions_per_s": round(sum(timed_questions) / total, 1),
        "questions_per_step": round(sum(timed_questions) / len(seconds), 1),
        "loss_first_last_timed": [round(losses[0], 4), round(losses[-1], 4)],
    }
    row["projected_s_per_3000_example_epoch"] = round(BOW_CNN_EXAMPLES_PER_EPOCH / row["examples_per_s"], 1)
    row.update(inference(trainer, args))
    return row


def inference(trainer: Trainer, args: argparse.Namespace) -> dict[str, Any]:
    """Questions encoded per second in eval mode, batches of 256 distinct training questions."""
    questions = list(trainer.data.questions.values())
    random.Random(0).shuffle(questions)
    model = trainer.model
    model.eval()
    batches = [questions[i : i + INFERENCE_BATCH] for i in range(0, len(questions), INFERENCE_BATCH)][
        : WARMUP_STEPS + args.infer_batches
    ]

    def step(i: int) -> float:
        with torch.no_grad():
            model.encode(**trainer.featurizer.batch(batches[i % len(batches)]))
        return 0.0

    seconds, _ = timed_steps(step, args.infer_batches, args.max_seconds, f"infer {model.model_type}")
    model.train()
    return {
        "inference_batches": len(seconds),
        "inference_questions_per_s": round(INFERENCE_BATCH * len(seconds) / sum(seconds), 1),
    }


# -- 2. BOW-CNN to its best dev score -------------------------------------------------------------
def bow_cnn_to_best(train: Dataset, dev: Dataset, args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    cfg = TrainConfig(
        model_type="bow-cnn",
        epochs=10_000,  # only the budget and early stopping end the run
        time_budget=BOW_CNN_BUDGET_S,
        seed=1,
        patience=args.patience,
        examples_per_epoch=BOW_CNN_EXAMPLES_PER_EPOCH,
        optimizer=args.optimizer,
        lr=args.lr,
    )
    t0 = time.perf_counter()
    trainer = Trainer(cfg, [train], [dev], out_dir / "bow-cnn-full")
    summary = trainer.run()
    wall = time.perf_counter() - t0
    info = summary["train"]
    best = trainer.history[info["best_epoch"] - 1]
    bm25 = summary["fusion"]["first_stages"].get("bm25", {})
    return {
        "config": asdict(cfg),
        "recipe": info["recipe"],
        "dev_queries": info["dev_queries"],
        "epochs_run": len(trainer.history),
        "best_epoch": info["best_epoch"],
        "best_dev_map": round(100 * info["best_dev_map"], 2),
        "seconds_at_best_epoch": round(best["seconds"], 1),
        "training_seconds": round(trainer.history[-1]["seconds"], 1),
        "wall_seconds_including_fusion_and_checkpoint": round(wall, 1),
        "best_within_budget": best["seconds"] <= BOW_CNN_BUDGET_S,
        "bm25_dev_map_same_queries": round(100 * bm25.get("first_stage_dev_map", float("nan")), 2),
        "history": [{k: round(v, 4) for k, v in row.items()} for row in trainer.history],
    }


# -- 3. RCNN pre-training -------------------------------------------------------------------------
def pretrain_throughput(
    trainer: Trainer, questions: list[Question], args: argparse.Namespace, desc: str
) -> dict[str, Any]:
    """The loop body of ``Trainer.pretrain`` timed on batches of 64 of ``questions``."""
    decoder = TitleDecoder.for_model(
        trainer.model, output_vocab_size=min(len(trainer.featurizer.vocab), PRETRAIN_VOCAB)
    )
    optimizer = torch.optim.Adam([p for p in decoder.parameters() if p.requires_grad], lr=1e-3)
    decoder.train()
    featurizer = trainer.featurizer

    def step(i: int) -> float:
        start = (i * PRETRAIN_BATCH) % max(len(questions) - PRETRAIN_BATCH, 1)
        loss = decoder.question_loss(**featurizer.batch(questions[start : start + PRETRAIN_BATCH]))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(decoder.parameters(), 5.0)
        optimizer.step()
        return float(loss.item())

    for question in questions[: PRETRAIN_BATCH * (WARMUP_STEPS + args.pretrain_steps + 1)]:
        featurizer.ids(question)
    seconds, losses = timed_steps(step, args.pretrain_steps, args.max_seconds, desc)
    qps = PRETRAIN_BATCH * len(seconds) / sum(seconds)
    with_body = sum(1 for q in questions if q.body.strip()) / len(questions)
    return {
        "questions_with_body": round(with_body, 3),
        "timed_steps": len(seconds),
        "seconds_per_step": round(sum(seconds) / len(seconds), 3),
        "questions_per_s": round(qps, 1),
        "projected_epoch_s_50000": round(PRETRAIN_QUESTIONS / qps, 1),
        "projected_fits_20_min": PRETRAIN_QUESTIONS / qps <= PRETRAIN_BUDGET_S,
        "loss_first_last_timed": [round(losses[0], 4), round(losses[-1], 4)],
    }


def rcnn_pretraining(dev: Dataset, args: argparse.Namespace, out_dir: Path) -> dict[str, Any]:
    corpus, sources = pretrain_corpus(PRETRAIN_QUESTIONS)
    cfg = TrainConfig(model_type="rcnn", seed=1, show_progress=False, max_dev_queries=50)
    t0 = time.perf_counter()
    trainer = Trainer(cfg, [corpus], [dev], out_dir / "rcnn-pretrain")
    out: dict[str, Any] = {
        "corpus_questions": len(trainer.data.questions),
        "corpus_sources": sources,
        "vocabulary": len(trainer.featurizer.vocab),
        "output_vocabulary": min(len(trainer.featurizer.vocab), PRETRAIN_VOCAB),
        "trainer_init_s": round(time.perf_counter() - t0, 2),
    }
    questions = list(trainer.data.questions.values())
    with_body = [q for q in questions if q.body.strip()]
    random.Random(0).shuffle(questions)
    random.Random(0).shuffle(with_body)
    out["with_bodies"] = pretrain_throughput(trainer, with_body, args, "pre-train (bodies)")
    out["corpus_mix"] = pretrain_throughput(trainer, questions, args, "pre-train (corpus)")
    if args.full:
        out["full_epoch"] = rcnn_pretrain_epoch(corpus, dev, args, out_dir)
    return out


def rcnn_pretrain_epoch(corpus: Dataset, dev: Dataset, args: argparse.Namespace, out_dir: Path) -> dict:
    """``Trainer.pretrain`` for one epoch over the corpus, budget 1,200 s from the Trainer's start."""
    cfg = TrainConfig(model_type="rcnn", seed=1, pretrain_epochs=1, time_budget=PRETRAIN_BUDGET_S)
    trainer = Trainer(cfg, [corpus], [dev], out_dir / "rcnn-pretrain-full")
    seen: list[int] = []
    original = trainer.featurizer.batch

    def counting_batch(questions: Sequence[Question]) -> dict[str, torch.Tensor]:
        seen.append(len(questions))
        return original(questions)

    trainer.featurizer.batch = counting_batch  # type: ignore[method-assign]
    t0 = time.perf_counter()
    trainer.pretrain()
    pretrain_s = time.perf_counter() - t0
    done = sum(seen)
    return {
        "questions": len(trainer.data.questions),
        "questions_processed": done,
        "pretrain_seconds": round(pretrain_s, 1),
        "seconds_since_trainer_start": round(time.monotonic() - trainer.started, 1),
        "epoch_fits_20_min": done == len(trainer.data.questions) and not trainer._out_of_time(),
        "questions_per_s": round(done / pretrain_s, 1),
    }


# -- report ---------------------------------------------------------------------------------------
def machine_info(threads: int) -> dict[str, Any]:
    return machine(
        torch=torch.__version__,
        torch_threads=torch.get_num_threads(),
        torch_interop_threads=torch.get_num_interop_threads(),
        threads_requested=threads,
    )


def print_throughput(rows: dict[str, dict[str, Any]]) -> None:
    header = (
        f"{'model':13s} {'loss':10s} {'optim':8s} {'batch':>5s} {'params':>10s} {'steps':>5s} "
        f"{'s/step':>7s} {'ex/s':>8s} {'train q/s':>9s} {'3000-ex epoch s':>15s} {'infer q/s':>9s}"
    )
    print(header)
    print("-" * len(header))
    for name, r in rows.items():
        rec = r["recipe"]
        print(
            f"{name:13s} {rec['loss']:10s} {rec['optimizer']:8s} {rec['batch_size']:5d} "
            f"{r['parameters']:10,d} {r['timed_steps']:5d} {r['seconds_per_step']:7.3f} "
            f"{r['examples_per_s']:8.1f} {r['train_questions_per_s']:9.0f} "
            f"{r['projected_s_per_3000_example_epoch']:15.1f} {r['inference_questions_per_s']:9.0f}"
        )


def print_pretraining(pre: dict[str, Any]) -> None:
    print(
        f"\nRCNN pre-training (TitleDecoder, Adam, batch {PRETRAIN_BATCH}); corpus "
        f"{pre['corpus_questions']:,} questions {pre['corpus_sources']}"
    )
    for key in ("with_bodies", "corpus_mix"):
        r = pre[key]
        print(
            f"  {key:12s} ({100 * r['questions_with_body']:.0f}% with body): "
            f"{r['questions_per_s']:7.1f} q/s, "
            f"one epoch over {PRETRAIN_QUESTIONS:,} ≈ {r['projected_epoch_s_50000']:7.0f} s "
            f"(fits {PRETRAIN_BUDGET_S:.0f} s: {r['projected_fits_20_min']})"
        )
    if "full_epoch" in pre:
        r = pre["full_epoch"]
        print(
            f"  full epoch: {r['questions_processed']:,}/{r['questions']:,} questions in "
            f"{r['pretrain_seconds']:.0f} s; fits 20 min: {r['epoch_fits_20_min']}"
        )
    else:
        print("  full pre-training epoch: skipped (run with --full)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps per model type")
    parser.add_argument("--infer-batches", type=int, default=8, help="timed inference batches of 256")
    parser.add_argument("--pretrain-steps", type=int, default=8, help="timed pre-training steps per corpus")
    parser.add_argument(
        "--max-seconds", type=float, default=15.0, help="stop timing a measurement after this (>= 3 steps)"
    )
    parser.add_argument("--models", nargs="+", default=list(ALL_TYPES), choices=ALL_TYPES)
    parser.add_argument("--full", action="store_true", help="also the 10-min BOW-CNN and 20-min RCNN runs")
    parser.add_argument("--optimizer", choices=["sgd", "adam", "adadelta"], help="--full BOW-CNN override")
    parser.add_argument("--lr", type=float, help="--full BOW-CNN learning rate (default: the paper's)")
    parser.add_argument("--patience", type=int, default=3, help="--full BOW-CNN early-stopping patience")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="cpu",
                        help="esrerank train's --device (default cpu: the figures of this 2-core machine)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "training.json")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        report = {"command": "python " + " ".join(sys.argv), "machine": machine_info(args.threads),
                  "device": "cuda", "measured": False,
                  "reason": f"torch {torch.__version__} sees no CUDA device on this machine, and no GPU "
                            "machine was lent to the session that wrote this file; run the command on a GPU "
                            "machine to measure"}
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"no GPU: {report['reason']}; wrote {args.out}")
        return
    report: dict[str, Any] = {
        "command": "python " + " ".join(sys.argv),
        "machine": machine_info(args.threads),
        "settings": {k: v for k, v in vars(args).items() if k != "out"}
        | {"warmup_steps": WARMUP_STEPS, "inference_batch": INFERENCE_BATCH, "split": SPLIT_SIZES},
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_training_") as tmp:
        tmp_dir = Path(tmp)
        train_path, dev_path = askubuntu_split(tmp_dir)
        train = read_spec(f"pairs:{train_path}")
        dev = read_spec(f"pairs:{dev_path}")
        report["data"] = {
            "train_pairs": len(train.pairs),
            "train_duplicates": sum(p.label > 0 for p in train.pairs),
            "dev_pairs": len(dev.pairs),
            "dev_duplicates": sum(p.label > 0 for p in dev.pairs),
        }
        throughput: dict[str, dict[str, Any]] = {}
        for model_type in tqdm(args.models, desc="model types"):
            throughput[model_type] = model_throughput(model_type, train, small_dev(dev), args, tmp_dir)
        report["throughput"] = throughput
        print_throughput(throughput)

        if args.full:
            report["bow_cnn_to_best"] = r = bow_cnn_to_best(train, dev, args, tmp_dir)
            print(
                f"\nBOW-CNN: best dev MAP {r['best_dev_map']:.2f} "
                f"(BM25 {r['bm25_dev_map_same_queries']:.2f}) "
                f"at epoch {r['best_epoch']}, {r['seconds_at_best_epoch']:.0f} s "
                f"(within {BOW_CNN_BUDGET_S:.0f} s: {r['best_within_budget']}); {r['epochs_run']} epochs run"
            )
        else:
            report["bow_cnn_to_best"] = "skipped (run with --full)"
            print("\nBOW-CNN time to best dev score: skipped (run with --full)")

        report["rcnn_pretraining"] = rcnn_pretraining(small_dev(dev), args, tmp_dir)
        print_pretraining(report["rcnn_pretraining"])

    report["total_seconds"] = round(time.perf_counter() - started, 1)
    report["machine"]["load_average_at_end"] = load_average()
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\ntotal {report['total_seconds']:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
