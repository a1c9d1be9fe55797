"""β fitted where the epoch was chosen (``--fusion-fit epoch-data``, the old rule) against β fitted on
other dev queries (``held-out``, the default), on data neither saw; docs/results.md's fusion table.

Per model type, two ``esrerank train`` runs that differ only in ``--fusion-fit`` (same data, seed and
time budget), then ``esrerank evaluate`` of ``fused`` with each first stage on unseen data, and a paired
randomization test of the two fits query by query (``evaluation.significance.paired_test``):

- **SemEval-2016**: trained on train-part1; the epoch and β come from the dev file; reported on
  train-part2, whose questions and threads part1 and the dev file do not hold (67 questions);
- **AskUbuntu** (``--datasets askubuntu``): the split of ``paper_models.py``; the epoch and β come from
  its dev clusters; reported on its held-out test clusters (``fused`` reranks BM25's or LM-Dirichlet's
  top 100 among all 36,346 titles; ``--au-queries`` of the 1,994 test queries).

Every step is an ``esrerank`` command printed before it runs; finished steps are kept, so a stopped run
resumes. Usage: ``python benchmarks/fusion_fit.py --data ../shared/data --out runs/fusion-fit
--types transformer,bow-cnn --budget 120`` → ``benchmarks/fusion_fit.json`` and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _machine import machine
from paper_models import ALL_TYPES, DEV_QUERIES, ESRERANK, TYPES, prepare, record_seconds, run

from es_plugin_bridge.evaluation.significance import paired_test
from es_plugin_bridge.training.dev_split import EPOCH_DATA, HELD_OUT

HERE = Path(__file__).resolve().parent
RULES = (EPOCH_DATA, HELD_OUT)
SE_STAGES = ("given", "bm25", "lmdirichlet")
AU_STAGES = ("bm25", "lmdirichlet")


def train(model_type: str, rule: str, run_dir: Path, train_spec: str, dev_spec: str, words: Path,
          args: argparse.Namespace, extra: list[str]) -> Path:
    model = run_dir / "model"
    if not (model / "config.json").is_file():
        run_dir.mkdir(parents=True, exist_ok=True)
        embeddings = ["--embeddings", str(words)] if model_type in TYPES else []
        seconds = run([ESRERANK, "train", "--model-type", model_type, "--train", train_spec,
                       "--dev", dev_spec, "--out", str(model), *embeddings, "--fusion-fit", rule,
                       "--epochs", "50", "--patience", "3", "--time-budget", str(args.budget), "--seed", "1",
                       "--threads", str(args.threads), "--quiet", *extra], run_dir / "train.log")
        record_seconds(run_dir, "train", seconds)
    return model


def evaluate(model: Path, run_dir: Path, stage: str, task: list[str]) -> Path:
    out = run_dir / f"{stage}.json"
    if not out.is_file():
        seconds = run([ESRERANK, "evaluate", *task, "--rankers", f"{stage},fused", "--first-stage", stage,
                       "--model", str(model), "--json", str(out), "--no-progress"], run_dir / f"{stage}.log")
        record_seconds(run_dir, f"evaluate-{stage}", seconds)
    return out


def per_query(result: Path, metric: str) -> dict[str, float]:
    rows = (json.loads(line) for line in result.with_suffix(".per_query.jsonl").read_text().splitlines())
    return {row["query_id"]: row["metrics"][metric] for row in rows if row["ranker"] == "fused"}


def compare(dataset: str, model_type: str, out: Path, stages: tuple[str, ...], metric: str,
            task: list[str], train_spec: str, dev_spec: str, words: Path, args: argparse.Namespace,
            extra: list[str]) -> list[dict]:
    """Both fits of one type on one dataset: a row per first stage."""
    results = {}
    for rule in RULES:
        run_dir = out / f"{dataset}-{model_type}-{rule}"
        model = train(model_type, rule, run_dir, train_spec, dev_spec, words, args, extra)
        config = json.loads((model / "config.json").read_text())
        results[rule] = {"config": config, "runs": {s: evaluate(model, run_dir, s, task) for s in stages
                                                     if s in config["fusion"]["first_stages"]}}
    rows = []
    for stage in stages:
        if not all(stage in results[r]["runs"] for r in RULES):
            continue
        scores = {r: per_query(results[r]["runs"][stage], metric) for r in RULES}
        ids = sorted(scores[EPOCH_DATA])
        if set(ids) != set(scores[HELD_OUT]):
            raise SystemExit(f"{dataset} {model_type} {stage}: the two runs scored different queries")
        old, new = ([scores[r][q] for q in ids] for r in RULES)
        test = paired_test(new, old)
        summary = {r: json.loads(results[r]["runs"][stage].read_text()) for r in RULES}
        rows.append({
            "dataset": dataset, "model_type": model_type, "first_stage": stage, "metric": metric,
            "queries": len(ids),
            "first_stage_score": summary[HELD_OUT]["rankers"][stage][metric],
            **{f"fused_{r}": summary[r]["rankers"]["fused"][metric] for r in RULES},
            **{f"beta_{r}": results[r]["config"]["fusion"]["first_stages"][stage]["weights"] for r in RULES},
            **{f"best_epoch_{r}": results[r]["config"]["train"]["best_epoch"] for r in RULES},
            "held_out_vs_epoch_data": test,
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=HERE.parent / "runs" / "fusion-fit")
    parser.add_argument("--types", default=",".join(ALL_TYPES))
    parser.add_argument("--datasets", default="semeval")
    parser.add_argument("--budget", type=float, default=120.0, help="seconds of training per run")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--au-queries", type=int, default=500)
    parser.add_argument("--json", type=Path, default=HERE / "fusion_fit.json")
    args = parser.parse_args()
    paths = prepare(args.data, args.out, args.threads, args.datasets)
    se = paths["se"]
    part1, part2, dev = (f"semeval:{se / name}" for name in (
        "SemEval2016-Task3-CQA-QL-train-part1-v1.1.xml", "SemEval2016-Task3-CQA-QL-train-part2.xml",
        "SemEval2016-Task3-CQA-QL-dev.xml"))
    rows: list[dict] = []
    for model_type in args.types.split(","):
        if "semeval" in args.datasets:
            rows += compare("semeval", model_type, args.out, SE_STAGES, "map",
                            ["--task", "rerank", "--data", part2], part1, dev, paths["w2v_se"], args, [])
        if "askubuntu" in args.datasets and model_type != "cross-encoder":
            au = paths["au"]
            cap = ["--max-dev-queries", str(DEV_QUERIES[model_type])] if model_type in DEV_QUERIES else []
            rows += compare("askubuntu", model_type, args.out, AU_STAGES, "mrr@10",
                            ["--task", "retrieval", "--queries", f"pairs:{au / 'test.tsv'}", "--corpus",
                             f"pairs:{paths['titles']}", "--max-queries", str(args.au_queries)],
                            f"pairs:{au / 'train.tsv'}", f"pairs:{au / 'dev.tsv'}", paths["w2v_au"], args,
                            ["--examples-per-epoch", "3000", *cap])
    before = json.loads(args.json.read_text()) if args.json.is_file() else {}
    keep = {(r["dataset"], r["model_type"], r["first_stage"]) for r in rows}
    merged = [r for r in before.get("rows", [])
              if (r["dataset"], r["model_type"], r["first_stage"]) not in keep]
    command = "python " + " ".join(["benchmarks/fusion_fit.py", *sys.argv[1:]])
    commands = [c for c in before.get("commands", [before["command"]] if "command" in before else [])
                if c != command] + [command]
    args.json.write_text(json.dumps({"commands": commands, "budget_s": args.budget, "machine": machine(),
                                     "rows": merged + rows}, indent=2) + "\n")
    print(table(merged))
    return 0


def table(rows: list[dict]) -> str:
    lines = ["| dataset | model | first stage | first stage alone | fused, β fit where the epoch was chosen "
             "| fused, β fit on other queries | p (paired) | β_fs old / new |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        p = r["held_out_vs_epoch_data"]["p_value"]
        lines.append(
            f"| {r['dataset']} | {r['model_type']} | {r['first_stage']} | {r['first_stage_score']:.2f} "
            f"| {r['fused_epoch-data']:.2f} | {r['fused_held-out']:.2f} | {p:.3f} "
            f"| {r['beta_epoch-data']['first_stage']:.2f} / {r['beta_held-out']['first_stage']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
