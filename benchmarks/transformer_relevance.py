"""The transformer type on real data: MiniLM as it comes against fine-tuned, fp32 against int8.

Every step is an ``esrerank`` command printed before it runs (``benchmarks/paper_models.py``'s helpers),
so any figure can be reproduced by hand:

1. the demo's AskUbuntu split (``esrerank split ... --dev 500 --test 1000 --seed 1``), and the
   pair-classification halves of ``val.tsv`` titles that share no question with its training part;
2. per model — ``asis`` (``--epochs 0``: all-MiniLM-L6-v2 as the package ships it, β and calibration
   fit on dev) and ``tuned`` (the default recipe, fine-tuned within ``--budget`` seconds; the
   pretrained model competes on dev, so ``tuned`` can be ``asis`` again) — ``export-onnx`` in fp32
   and ``--quantize int8``;
3. AskUbuntu retrieval of the test duplicates among every distinct title under the four protocols
   (``--relevant pair|cluster`` × ``--queries-from q1|q2``), rankers ``bm25,dense,hybrid,fused`` (fp32),
   and ``pair``/``cluster`` q1 again on int8: the metric change of quantisation;
4. title-pair accuracy (threshold on one half of the ``val.tsv`` titles, reported on the other);
5. SemEval-2016 dev reranking: the model trained (or, for ``asis``, only fitted) on train-part1 with
   train-part2 as dev, reported on the dev file (never tuned on);
6. encoding speed of the exported directory, fp32 and int8, in titles per second (2 threads,
   batches of 64), measured in the same run.

Usage: ``python benchmarks/transformer_relevance.py [--models asis,tuned] [--budget 900]`` →
``benchmarks/transformer_relevance.json`` and Markdown tables on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paper_models import ESRERANK, HERE, askubuntu_split, classify_titles, evaluate, run  # noqa: E402

PROTOCOLS = [("pair", "q1"), ("cluster", "q1"), ("pair", "q2"), ("cluster", "q2")]
RANKERS = "bm25,dense,hybrid,fused"
SE = "SemEval2016-Task3-CQA-QL-{}.xml"


def train(name: str, run_dir: Path, train_spec: str, dev_spec: str, budget: int) -> Path:
    model = run_dir / "model"
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (model / "config.json").is_file():
        extra = ["--epochs", "0"] if name == "asis" else ["--time-budget", str(budget)]
        run(
            [
                ESRERANK,
                "train",
                "--model-type",
                "transformer",
                "--train",
                train_spec,
                "--dev",
                dev_spec,
                "--out",
                str(model),
                *extra,
                "--quiet",
            ],
            run_dir / "train.log",
        )
    return model


def export(model: Path, out: Path, int8: bool) -> Path:
    if not (out / "config.json").is_file():
        run(
            [
                ESRERANK,
                "export-onnx",
                str(model),
                "--out",
                str(out),
                "--force",
                "--quiet",
                *(["--quantize", "int8"] if int8 else []),
            ]
        )
    return out


def retrieval(model: Path, run_dir: Path, au: Path, data: Path, relevant: str, queries_from: str) -> dict:
    name = f"retrieval-{relevant}-{queries_from}"
    path = run_dir / f"{name}.json"
    run_dir.mkdir(parents=True, exist_ok=True)
    if not path.is_file():
        run(
            [
                ESRERANK,
                "evaluate",
                "--task",
                "retrieval",
                "--queries",
                f"pairs:{au / 'test.tsv'}",
                "--corpus",
                f"pairs:{data / 'askubuntu-pairs/train_titles.tsv'}",
                "--rankers",
                RANKERS,
                "--relevant",
                relevant,
                "--queries-from",
                queries_from,
                "--model",
                str(model),
                "--json",
                str(path),
                "--no-progress",
            ],
            run_dir / f"{name}.log",
        )
    return json.loads(path.read_text())


def speed(directory: Path, au: Path, n: int = 2000) -> float:
    """Titles per second of the exported directory (2 threads, batches of 64), best of 2 passes."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.serving.model_dir import ModelDirectory

    questions = list(read_spec(f"pairs:{au / 'train.tsv'}").questions.values())[:n]
    loaded = ModelDirectory.load(directory, threads=2, batch_size=64)
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        loaded.vectors(questions)
        best = min(best, time.perf_counter() - start)
    return round(len(questions) / best, 1)


def measure(name: str, data: Path, au: Path, out: Path, budget: int) -> dict:
    run_dir = out / name
    model = train(name, run_dir, f"pairs:{au / 'train.tsv'}", f"pairs:{au / 'dev.tsv'}", budget)
    result: dict = {"train": json.loads((model / "config.json").read_text())["train"]}
    for int8 in (False, True):
        kind = "int8" if int8 else "fp32"
        onnx = export(model, run_dir / f"onnx-{kind}", int8)
        protocols = PROTOCOLS if not int8 else PROTOCOLS[:2]
        result[kind] = {
            f"{r}-{q}": retrieval(onnx, run_dir / kind, au, data, r, q)["rankers"] for r, q in protocols
        }
        result[kind]["titles_per_s"] = speed(onnx, au)
    classify = run_dir / "fp32" / "classify.json"
    if not classify.is_file():
        classify_titles(run_dir / "onnx-fp32", run_dir / "fp32", au, "jaccard,bm25,model")
    result["classify"] = json.loads(classify.read_text())["rankers"]
    se, se_dir = data / "semeval2016-task3", out / f"semeval-{name}"
    se_model = train(
        name,
        se_dir,
        f"semeval:{se / SE.format('train-part1-v1.1')}",
        f"semeval:{se / SE.format('train-part2')}",
        budget,
    )
    if not (se_dir / "rerank.json").is_file():
        evaluate(
            se_model,
            se_dir,
            "rerank",
            "--data",
            f"semeval:{se / SE.format('dev')}",
            "--rankers",
            "given,bm25,model,fused",
        )
    result["rerank"] = json.loads((se_dir / "rerank.json").read_text())["rankers"]
    result["semeval_train"] = json.loads((se_model / "config.json").read_text())["train"]
    return result


def tables(results: dict) -> str:
    lines = [
        "| model | protocol | bm25 | dense | hybrid | fused | dense / bm25 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results["runs"].items():
        for kind in ("fp32", "int8"):
            for protocol, rankers in r[kind].items():
                if protocol == "titles_per_s":
                    continue
                cells = " | ".join(f"{rankers[k]['acc@1']:.2f}" for k in ("bm25", "dense", "hybrid", "fused"))
                ratio = rankers["dense"]["acc@1"] / max(rankers["bm25"]["acc@1"], 1e-9)
                lines.append(f"| {name} ({kind}) | {protocol} | {cells} | {ratio:.2f}× |")
    lines += [
        "",
        "| model | best epoch | pair accuracy (model / bm25 / jaccard) | SemEval dev MAP (model / fused) "
        "| titles/s fp32 / int8 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results["runs"].items():
        c, rr = r["classify"], r["rerank"]
        lines.append(
            f"| {name} | {r['train']['best_epoch']} | {c['model']['accuracy']:.2f} / "
            f"{c['bm25']['accuracy']:.2f} / {c['jaccard']['accuracy']:.2f} | {rr['model']['map']:.2f} / "
            f"{rr['fused']['map']:.2f} | {r['fp32']['titles_per_s']} / {r['int8']['titles_per_s']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=HERE.parent.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=HERE.parent / "runs" / "transformer")
    parser.add_argument("--models", default="asis,tuned")
    parser.add_argument("--budget", type=int, default=900, help="fine-tuning seconds (the default recipe's)")
    args = parser.parse_args()
    au = askubuntu_split(args.data, args.out, dev=500, test=1000)
    results: dict = {"command": " ".join(sys.argv), "budget_s": args.budget, "runs": {}}
    target = HERE / "transformer_relevance.json"
    for name in args.models.split(","):
        results["runs"][name] = measure(name, args.data, au, args.out, args.budget)
        results["table"] = tables(results)
        target.write_text(json.dumps(results, indent=2) + "\n")  # after each model: partial results survive
    print(results["table"])


if __name__ == "__main__":
    main()
