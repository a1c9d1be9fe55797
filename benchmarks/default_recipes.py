"""The default recipe against the paper's: what ``esrerank train`` gives with no options, measured.

For each model type given (default: bow-cnn) two runs with the same time budget, one
``--recipe paper`` (the paper's loss, optimiser and learning rate; random word vectors, as the product's
defaults were before) and one with the default ``--recipe best`` (word2vec trained on the training text
by ``train`` itself, Adam for the CNNs, dev checked every 640 examples). Every step is an ``esrerank``
command printed before it runs; the data and evaluations are those of ``benchmarks/paper_models.py``
(its split, pair-classification halves of ``val.tsv`` and SemEval protocol: train on train-part1, tune
on train-part2, report on dev), so nothing reported is tuned on.

Usage: ``python benchmarks/default_recipes.py [--types bow-cnn] [--budget 240]`` →
``benchmarks/default_recipes.json`` and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paper_models import ESRERANK, HERE, askubuntu_split, classify_titles, evaluate, run  # noqa: E402

from es_plugin_bridge.models.registry import RECIPE_NAMES  # noqa: E402

RECIPES = tuple(reversed(RECIPE_NAMES))  # the paper's first, then the default


def train(model_type: str, recipe: str, run_dir: Path, train_spec: str, dev_spec: str, budget: int) -> Path:
    model = run_dir / "model"
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (model / "config.json").is_file():
        run([ESRERANK, "train", "--model-type", model_type, "--recipe", recipe, "--train", train_spec,
             "--dev", dev_spec, "--out", str(model), "--time-budget", str(budget), "--quiet"],
            run_dir / "train.log")
    return model


def measure(model_type: str, recipe: str, data: Path, au: Path, out: Path, budget: int) -> dict:
    result: dict = {}
    run_dir = out / f"askubuntu-{model_type}-{recipe}"
    model = train(model_type, recipe, run_dir, f"pairs:{au / 'train.tsv'}", f"pairs:{au / 'dev.tsv'}", budget)
    evaluate(model, run_dir, "retrieval", "--queries", f"pairs:{au / 'test.tsv'}", "--corpus",
             f"pairs:{data / 'askubuntu-pairs/train_titles.tsv'}", "--rankers", "bm25,model,fused")
    classify_titles(model, run_dir, au, "jaccard,bm25,model")
    for task in ("retrieval", "classify"):
        result[task] = json.loads((run_dir / f"{task}.json").read_text())["rankers"]
    result["train"] = json.loads((model / "config.json").read_text())["train"]
    se = data / "semeval2016-task3"
    run_dir = out / f"semeval-{model_type}-{recipe}"
    part1, part2 = "SemEval2016-Task3-CQA-QL-train-part1-v1.1.xml", "SemEval2016-Task3-CQA-QL-train-part2.xml"
    model = train(model_type, recipe, run_dir, f"semeval:{se / part1}", f"semeval:{se / part2}", budget)
    evaluate(model, run_dir, "rerank", "--data", f"semeval:{se / 'SemEval2016-Task3-CQA-QL-dev.xml'}",
             "--rankers", "given,bm25,model,fused")
    result["rerank"] = json.loads((run_dir / "rerank.json").read_text())["rankers"]
    return result


def row(model_type: str, recipe: str, r: dict) -> str:
    t = r["train"]
    return (f"| {model_type} | {recipe} | {t['recipe']['optimizer']} {t['recipe']['lr']:g}, "
            f"{t['embeddings']['source']} | {t['best_epoch']} | "
            f"{r['classify']['model']['accuracy']:.2f} | {r['retrieval']['model']['acc@1']:.2f} / "
            f"{r['retrieval']['fused']['acc@1']:.2f} | {r['retrieval']['fused']['mrr@10']:.2f} | "
            f"{r['rerank']['model']['map']:.2f} / {r['rerank']['fused']['map']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=HERE.parent / "runs" / "recipes")
    parser.add_argument("--types", default="bow-cnn")
    parser.add_argument("--budget", type=int, default=240, help="training seconds per run")
    args = parser.parse_args()
    au = askubuntu_split(args.data, args.out)
    results: dict = {"budget_s": args.budget, "command": " ".join(sys.argv), "runs": {}}
    lines = ["| type | recipe | optimiser, vectors | best epoch | pair accuracy (model) "
             "| AskUbuntu Acc@1 (model / fused) | MRR@10 (fused) | SemEval dev MAP (model / fused) |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for model_type in args.types.split(","):
        for recipe in RECIPES:
            r = measure(model_type, recipe, args.data, au, args.out, args.budget)
            results["runs"][f"{model_type}/{recipe}"] = r
            lines.append(row(model_type, recipe, r))
    first = next(iter(results["runs"].values()))
    results["baselines"] = {"bm25_acc@1": first["retrieval"]["bm25"]["acc@1"],
                            "jaccard_pair_accuracy": first["classify"]["jaccard"]["accuracy"],
                            "given_map": first["rerank"]["given"]["map"]}
    results["table"] = "\n".join(lines)
    (HERE / "default_recipes.json").write_text(json.dumps(results, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
