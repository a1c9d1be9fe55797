"""The training loop shared by every model type: batches, the recipe's objective, early stopping.

One epoch walks what the recipe's objective trains on (``training.objectives``: the positive pairs for
the ranking and in-batch losses, the labelled pairs for MSE) in a seeded shuffle, capped at
``examples_per_epoch`` so the dev metric is checked often on large data; the objective gives each
batch's loss, asking the trainer to encode questions and to draw (or mine) negatives. After
each epoch the dev MAP decides: a better model is checkpointed, ``patience`` epochs without one
stop the run. ``time_budget`` bounds the whole run, from reading the data to the saved checkpoint: it
is checked after every step, and the steps stop while there is still time for what must follow them
(one dev evaluation, the β fit and the save, each timed on this run), so the last work is evaluated,
not lost. Once done, the best model's β fusion weights are fit on the same dev queries.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from es_plugin_bridge.core.fusion import FIRST_STAGES
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.types import Dataset, Question, RankingQuery
from es_plugin_bridge.engines import EmbeddedIndex
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models import PRETRAINABLE_TYPES, QuestionSimilarityModel, TitleDecoder
from es_plugin_bridge.models.registry import model_type
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.calibration_fit import fit_platt
from es_plugin_bridge.training.checkpoint import save_checkpoint, write_json
from es_plugin_bridge.training.dev_split import EPOCH_DATA, DevSplit, split_dev
from es_plugin_bridge.training.devdata import FORCED, PAIR_QUERIES, WINDOW, dev_queries
from es_plugin_bridge.training.device import resolve_device, use_bf16
from es_plugin_bridge.training.examples import TrainingSet, build_training_set
from es_plugin_bridge.training.families import BuildSetup, family_of
from es_plugin_bridge.training.featurize import Featurizer
from es_plugin_bridge.training.fusion_fit import fit_weights, fuse, mean_ap
from es_plugin_bridge.training.hybrid_dev import hybrid_dev_queries
from es_plugin_bridge.training.hybrid_fit import fit_hybrid
from es_plugin_bridge.training.objectives import Objective, Pair, objective_for
from es_plugin_bridge.training.plots import plot_history
from es_plugin_bridge.training.recipes import Recipe, make_optimizer, recipe_for, warmup_schedule
from es_plugin_bridge.training.torch_scorer import NeuralScorer

log = logging.getLogger(__name__)


@dataclass
class TrainConfig:
    """Everything ``esrerank train`` can set; stored in the checkpoint's config.json."""

    model_type: str
    #: ``best`` (the measured default) or ``paper``; the fields below left None come from it.
    recipe: str = "best"
    epochs: int | None = None
    time_budget: float | None = None
    seed: int = 1
    patience: int | None = None
    examples_per_epoch: int | None = None
    loss: str | None = None
    optimizer: str | None = None
    lr: float | None = None
    batch_size: int | None = None
    negatives: int | None = None
    hard_negatives: int | None = None
    hyper: dict[str, Any] = field(default_factory=dict)
    embeddings: str | None = None
    #: With no ``embeddings``: word2vec on the training text (True) or random vectors (False).
    word2vec: bool | None = None
    embedding_dim: int = 200
    min_count: int = 1
    text: dict[str, Any] = field(default_factory=dict)
    max_title: int = 48
    max_body: int = 100
    pretrain_epochs: int = 0
    dev_window: int = WINDOW
    max_dev_queries: int | None = 1000  # the one default (dev_queries takes it from here)
    #: ``held-out``: β and the calibration are fitted on dev queries that did not choose the epoch
    #: (``fusion_share`` of the duplicate clusters); ``epoch-data``: on the same queries (training.dev_split);
    #: None: the model type's measured default (``models.registry.ModelType.fusion_fit``).
    fusion_fit: str | None = None
    fusion_share: float = 0.5
    show_progress: bool = True
    init: str | None = None  # transformer: local sentence-transformers directory (default: the packaged one)
    #: ``auto`` (CUDA when torch sees a GPU), ``cpu`` or ``cuda`` (training.device).
    device: str = "auto"
    #: bfloat16 autocast on a GPU that supports it (ignored on the CPU).
    mixed_precision: bool = True


def set_seed(seed: int) -> random.Random:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return random.Random(seed)


class Trainer:
    """Trains one model; ``run`` returns the summary written to config.json."""

    def __init__(
        self, cfg: TrainConfig, train_sets: Sequence[Dataset], dev_sets: Sequence[Dataset], out: Path
    ) -> None:
        self.started = time.monotonic()  # the budget covers the whole run, data preparation included
        self._eval_seconds: float | None = None  # what one dev evaluation costs, once measured
        self.cfg = cfg
        self.out = Path(out)
        self.recipe: Recipe = recipe_for(
            cfg.model_type,
            cfg.recipe,
            loss=cfg.loss,
            optimizer=cfg.optimizer,
            lr=cfg.lr,
            batch_size=cfg.batch_size,
            negatives=cfg.negatives,
            hard_negatives=cfg.hard_negatives,
            epochs=cfg.epochs,
            time_budget=cfg.time_budget,
            patience=cfg.patience,
            word2vec=cfg.word2vec,
        )
        self.embeddings_info: dict[str, Any] = {}
        self._mined: dict[str, list[str]] | None = None
        self.rng = set_seed(cfg.seed)
        self.data: TrainingSet = build_training_set(train_sets)
        options = TextOptions.from_mapping(cfg.text, source="--text options")
        self.preprocessor = Preprocessor(options)
        self.dev = dev_queries(dev_sets, self.preprocessor, cfg.dev_window, cfg.max_dev_queries)
        self.dev_sets = list(dev_sets)
        self.split = self._split_dev()
        vocab = Vocabulary.build(
            (self.preprocessor.tokens(q) for q in self.data.questions.values()), min_count=cfg.min_count
        )
        long_titles = sum(len(self.preprocessor.title_tokens(q)) > cfg.max_title
                          for q in self.data.questions.values())
        if long_titles:
            log.warning("%d of %d training titles are longer than %d tokens and are cut to it (--max-title)",
                        long_titles, len(self.data.questions), cfg.max_title)
        self.family = family_of(cfg.model_type)
        built = self.family.build(BuildSetup(cfg, vocab, self.preprocessor, self.recipe.word2vec,
                                             lambda: self._training_sentences(train_sets)))
        self.model: QuestionSimilarityModel = built.model
        self.featurizer: Featurizer = built.featurizer
        self.embeddings_info = built.embeddings_info
        self.objective: Objective[Any] = objective_for(self.recipe, self.model)
        self.device = torch.device(resolve_device(cfg.device, torch.cuda.is_available(), torch.__version__))
        self.model.to(self.device)
        bf16 = self.device.type == "cuda" and torch.cuda.is_bf16_supported()
        self.bf16 = use_bf16(self.device.type, bf16, cfg.mixed_precision)
        self.pool = self.data.pool
        self.history: list[dict[str, float]] = []

    # -- helpers --------------------------------------------------------------------------------
    def _split_dev(self) -> DevSplit:
        """The dev queries that pick the epoch and those that fit β; logged, and saved in the summary."""
        if self.recipe.epochs == 0:  # nothing is chosen: every dev query fits β
            split = DevSplit(self.dev, self.dev, f"{EPOCH_DATA} (--epochs 0: no epoch is chosen)")
        else:
            rule = self.cfg.fusion_fit or model_type(self.cfg.model_type).fusion_fit
            split = split_dev(self.dev, rule, self.cfg.fusion_share, self.cfg.seed)
        if split.disjoint:
            log.info("dev: %d queries pick the epoch, %d other queries (other duplicate clusters) fit the "
                     "fusion β and calibration", len(split.select), len(split.fit))
        else:
            log.info("dev: the same %d queries pick the epoch and fit the fusion β and calibration (%s)",
                     len(split.select), split.rule)
        return split

    def _training_sentences(self, train_sets: Sequence[Dataset]) -> list[list[str]]:
        """Titles, bodies and unlabelled texts (e.g. SemEval comments) of the training data, as tokens."""
        pre = self.preprocessor
        sentences = [toks for q in self.data.questions.values()
                     for toks in (pre.title_tokens(q), pre.body_tokens(q)) if toks]
        sentences += [toks for ds in train_sets for text in ds.unlabelled if (toks := pre.text_tokens(text))]
        return sentences

    def device_name(self) -> str:
        """The device trained on, as the summary records it (``cpu``, ``cuda: NVIDIA H100, bf16``)."""
        if self.device.type != "cuda":
            return "cpu"
        return f"cuda: {torch.cuda.get_device_name(self.device)}{', bf16' if self.bf16 else ''}"

    def _autocast(self) -> torch.autocast:
        """bfloat16 autocast on a GPU that supports it (``--mixed-precision``); a no-op elsewhere."""
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def _time_left(self) -> float | None:
        """Seconds of the budget left (None: no budget)."""
        budget = self.recipe.time_budget
        return None if budget is None else budget - (time.monotonic() - self.started)

    def _reserve(self) -> float:
        """Time to keep for what follows the last step: one dev evaluation, the β fit (about one more
        evaluation: the same dev vectors and first stages) and the save, with a margin for a machine
        whose load changes (2.5 evaluations + 1 s ran 5.8 % over on SemEval at load 5); before the first
        evaluation is timed, a tenth of the budget."""
        if self._eval_seconds is None:
            return 0.1 * float(self.recipe.time_budget or 0.0)
        return 3.0 * self._eval_seconds + 2.0

    def _out_of_time(self) -> bool:
        """Whether to stop stepping now, so that the run still ends within its budget."""
        left = self._time_left()
        return left is not None and left <= self._reserve()

    def _timed_dev_map(self) -> float:
        start = time.monotonic()
        score = self.dev_map()
        self._eval_seconds = time.monotonic() - start
        return score

    def _postfix(self, loss: float) -> dict[str, str]:
        """The progress bar's fields: the mean loss and, under a budget, the seconds left."""
        out = {"loss": f"{loss:.4f}"}
        left = self._time_left()
        if left is not None:
            out["left"] = f"{max(0.0, left):.0f}s"
        return out

    def encode(self, questions: Sequence[Question]) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
        """The model's encodings of the distinct ``questions`` (one featurized batch on the training
        device), and each question id's row in them."""
        unique = list({q.id: q for q in questions}.values())
        batch = {key: value.to(self.device) for key, value in self.featurizer.batch(unique).items()}
        encoded = self.model.encode(**batch)
        return encoded, {q.id: i for i, q in enumerate(unique)}

    def negatives(self, query_id: str, k: int) -> list[str]:
        """``k`` negatives of a query: ``recipe.hard_negatives`` of them drawn from its BM25-mined ones
        (none by default), the rest as ``TrainingSet.negatives`` picks them, with the run's seeded rng."""
        n = min(self.recipe.hard_negatives, k)
        mined: list[str] = []
        if n > 0:
            if self._mined is None:
                self._mined = self._mine_hard_negatives(n)
            found = self._mined.get(query_id) or []
            mined = self.rng.sample(found, min(n, len(found)))
        rest = [c for c in self.data.negatives(query_id, k, self.rng, self.pool) if c not in mined]
        return mined + rest[: k - len(mined)]

    def hard_negatives(self, batch: Sequence[Pair]) -> list[str]:
        """``recipe.hard_negatives`` BM25-mined negatives per pair of the batch (none by default): the
        in-batch loss's extra columns."""
        k = self.recipe.hard_negatives
        if k <= 0:
            return []
        if self._mined is None:
            self._mined = self._mine_hard_negatives(k)
        out: list[str] = []
        for a, _ in batch:
            found = self._mined.get(a) or []
            out += [found[self.rng.randrange(len(found))] for _ in range(k)] if found else []
        return out

    def _mine_hard_negatives(self, k: int, depth: int = 10) -> dict[str, list[str]]:
        """For each query of a positive pair, BM25's top ``depth`` training questions that are neither
        the query nor a known duplicate of it (the ones an encoder most easily confuses with it)."""
        questions, dupes = self.data.questions, self.data.duplicates
        ids = list(questions)
        tokens = {i: self.preprocessor.tokens(questions[i]) for i in ids}
        index = EmbeddedIndex.build([tokens[i] for i in ids], "bm25", ids=ids)
        queries = sorted({a for a, _ in self.data.positives})
        mined: dict[str, list[str]] = {}
        for a in tqdm(queries, desc="mining BM25 hard negatives", disable=not self.cfg.show_progress):
            banned = dupes.get(a, set()) | {a}
            hits = index.search(tokens[a], k=depth + len(banned), exclude=banned)
            mined[a] = [doc for doc, _ in hits[:depth]]
        log.info("BM25 hard negatives: up to %d per query for %d queries (%d per pair used)", depth,
                 len(mined), k)
        return mined

    def _epoch_examples(self) -> list[Any]:
        """The objective's examples in a seeded shuffle, capped at ``examples_per_epoch``."""
        examples = self.objective.examples(self)
        self.rng.shuffle(examples)
        cap = self.cfg.examples_per_epoch or self.recipe.examples_per_epoch
        return examples[:cap] if cap else examples

    # -- evaluation -----------------------------------------------------------------------------
    def _dev_questions(self, queries: Sequence[RankingQuery] | None = None) -> list[Question]:
        chosen = self.split.select if queries is None else queries
        return list({q.id: q for rq in chosen for q in (rq.query, *rq.candidates)}.values())

    def dev_map(self, queries: Sequence[RankingQuery] | None = None) -> float:
        """MAP of the model's own scores on the dev queries that pick the epoch (or on ``queries``)."""
        chosen = self.split.select if queries is None else queries
        self.model.eval()
        scorer = NeuralScorer(self.model, self.featurizer)
        scorer.prepare(self._dev_questions(chosen))  # one batched pass instead of one per query
        scores = [scorer.model_scores(rq.query, rq.candidates) for rq in chosen]
        self.model.train()
        return mean_ap(scores, [rq.labels for rq in chosen])

    def _warn_if_evaluation_eats_the_budget(self) -> None:
        """Say so when the dev evaluations the budget must keep room for leave it little for training."""
        budget = self.recipe.time_budget
        if budget is None or self._eval_seconds is None or self._reserve() < 0.5 * budget:
            return
        log.warning("one dev evaluation of %d queries takes about %.0f s, so the %.0f s budget leaves about "
                    "%.0f s for training: pass --max-dev-queries N (fewer dev queries) or a larger "
                    "--time-budget", len(self.split.select), self._eval_seconds, budget,
                    max(0.0, budget - self._reserve() - (time.monotonic() - self.started)))

    def _estimate_dev_seconds(self) -> float:
        """What one dev evaluation will cost, from timing it on an eighth of the dev queries (at least 4).

        A type whose untrained model does not compete (the cross-encoder: a new head) has no epoch-0
        evaluation, and its evaluations are the costly kind (every candidate runs through the network
        with its query): without this, the budget's reserve for the last evaluation was a guess.
        """
        select = self.split.select
        step = max(1, len(select) // max(4, len(select) // 8))
        sample = select[::step]
        start = time.monotonic()
        self.dev_map(sample)
        return (time.monotonic() - start) * len(select) / max(1, len(sample))

    # -- phases ---------------------------------------------------------------------------------
    def pretrain(self) -> None:
        """Lei et al. §4.2: generate titles from bodies and titles, on every training question."""
        if self.cfg.pretrain_epochs <= 0:
            return
        if self.cfg.model_type not in PRETRAINABLE_TYPES:
            raise UserError(
                f"--pretrain-epochs applies to {', '.join(PRETRAINABLE_TYPES)}, not {self.cfg.model_type}"
            )
        decoder = TitleDecoder.for_model(self.model, output_vocab_size=min(len(self.featurizer.vocab), 20000))
        decoder.to(self.device)
        optimizer = torch.optim.Adam([p for p in decoder.parameters() if p.requires_grad], lr=1e-3)
        questions = list(self.data.questions.values())
        decoder.train()
        for epoch in range(1, self.cfg.pretrain_epochs + 1):
            self.rng.shuffle(questions)
            bar = tqdm(
                range(0, len(questions), 64), desc=f"pre-train {epoch}", disable=not self.cfg.show_progress
            )
            for start in bar:
                batch = {key: value.to(self.device)
                         for key, value in self.featurizer.batch(questions[start : start + 64]).items()}
                with self._autocast():
                    loss = decoder.question_loss(**batch)
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(decoder.parameters(), 5.0)
                optimizer.step()
                bar.set_postfix(loss=f"{loss.item():.3f}")
                if self._out_of_time():
                    return

    def run(self) -> dict[str, Any]:
        """Pre-train (optional), train with early stopping, checkpoint the best, fit β; the summary."""
        self.pretrain()
        self.model.train()
        optimizer = make_optimizer(self.recipe, self.model.parameters())
        schedule = warmup_schedule(self.recipe, optimizer)
        best, best_epoch, stale = -1.0, 0, 0
        best_state: dict[str, torch.Tensor] | None = None
        # The model as initialised competes with every epoch when it is pretrained (a transformer:
        # fine-tuning must beat it on dev to be kept), and is all there is with epochs = 0.
        if self.recipe.epochs == 0 or self.family.starts_pretrained:
            best = self._timed_dev_map()
            self.history.append({"epoch": 0, "loss": None, "dev_map": best,
                                 "seconds": time.monotonic() - self.started})
            log.info("epoch 0 (as initialised): dev MAP %.2f", 100 * best)
            best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        elif self.recipe.time_budget is not None and self.dev:
            self._eval_seconds = self._estimate_dev_seconds()
        self._warn_if_evaluation_eats_the_budget()
        for epoch in range(1, self.recipe.epochs + 1):
            examples = self._epoch_examples()
            size = self.recipe.batch_size
            total, steps = 0.0, 0
            bar = tqdm(
                range(0, len(examples), size), desc=f"epoch {epoch}", disable=not self.cfg.show_progress
            )
            for start in bar:
                with self._autocast():
                    loss = self.objective.loss(examples[start : start + size], self)
                optimizer.zero_grad()
                loss.backward()
                if self.recipe.clip:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.recipe.clip)
                optimizer.step()
                if schedule is not None:
                    schedule.step()
                total += loss.item()
                steps += 1
                bar.set_postfix(self._postfix(total / steps))
                if self._out_of_time():
                    break
            score = self._timed_dev_map()
            self.history.append(
                {
                    "epoch": epoch,
                    "loss": total / max(steps, 1),
                    "dev_map": score,
                    "seconds": time.monotonic() - self.started,
                }
            )
            log.info("epoch %d: loss %.4f, dev MAP %.2f", epoch, total / max(steps, 1), 100 * score)
            if score > best:
                best, best_epoch, stale = score, epoch, 0
                best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            else:
                stale += 1
            if stale >= self.recipe.patience or self._out_of_time():
                break
        assert best_state is not None
        self.model.load_state_dict(best_state)
        self.model.eval()
        fusion = self.fit_fusion()
        summary = {
            "train": {
                "config": asdict(self.cfg),
                "recipe": asdict(self.recipe),
                "recipe_name": self.cfg.recipe,
                "embeddings": self.embeddings_info,
                "device": self.device_name(),
                "positives": len(self.data.positives),
                "questions": len(self.data.questions),
                "vocabulary": len(self.featurizer.vocab),
                "dev_queries": len(self.dev),
                "dev_split": self.split.describe(),
                "best_epoch": best_epoch,
                "best_dev_map": best,
                "seconds": time.monotonic() - self.started,
            },
            "fusion": fusion,
        }
        save_checkpoint(self.out, self.model, self.featurizer, summary)
        write_json(self.out / "history.json", self.history)
        plot_history(self.history, self.out / "training.png", f"{self.cfg.model_type}: training")
        return summary

    def fit_fusion(self) -> dict[str, Any]:
        """β for each first stage the dev data allows: ``given`` (when present), bm25, lmdirichlet; fitted,
        with the calibration, on the dev queries that did not pick the epoch (``self.split.fit``)."""
        scorer = NeuralScorer(self.model, self.featurizer)
        scorer.prepare(self._dev_questions(self.split.fit))
        # As at evaluation time, the first stage's window holds what it found: queries whose duplicate
        # BM25 missed (and that dev_queries put back for early stopping) are left out of the β fit.
        dev = [rq for rq in self.split.fit if rq.split != FORCED]
        components = [scorer.components(rq.query, rq.candidates) for rq in dev]
        labels = [rq.labels for rq in dev]
        stages = _first_stage_scores(dev, self.preprocessor)
        weights: dict[str, Any] = {}
        for stage, per_query in stages.items():
            feats = [
                {"first_stage": fs, "bow": c["bow"], "neural": c["neural"]}
                for fs, c in zip(per_query, components, strict=True)
            ]
            w, value = fit_weights(feats, labels)
            weights[stage] = {
                "weights": w,
                "dev_map": value,
                "first_stage_dev_map": mean_ap(per_query, labels),
                "calibration": fit_platt([fuse(f, w) for f in feats], labels),
            }
        default = "given" if "given" in weights else "bm25"
        out = {
            "fitted_on": f"{self.split.rule}: {len(dev)} dev queries",
            "first_stages": weights,
            "default": default,
            "model_dev_map": mean_ap([c["model"] for c in components], labels),
            "model_calibration": fit_platt([c["model"] for c in components], labels),
        }
        hybrid = self.fit_hybrid(scorer)
        if hybrid is not None:
            out["hybrid"] = hybrid
        return out

    def fit_hybrid(self, scorer: NeuralScorer) -> dict[str, Any] | None:
        """The learned hybrid (``training.hybrid_fit``) on the dev pairs' questions that fit β, searched
        among the dev collection; None for a model without vectors or dev data without pairs."""
        if scorer.pairwise or not any(ds.pairs for ds in self.dev_sets):
            return None
        only = {rq.query.id for rq in self.split.fit if rq.split.startswith(PAIR_QUERIES)}
        queries = hybrid_dev_queries(self.dev_sets, self.preprocessor, scorer, only=only)
        if not queries:
            return None
        fusion, report = fit_hybrid(queries, seed=self.cfg.seed)
        log.info("learned hybrid: %s (%s; held-out MRR@10 %s)", fusion.describe(), report["chosen"],
                 report["held_out"])
        return {"fusion": fusion.model_dump(mode="json"), "report": report}


def summary_lines(summary: dict[str, Any], out: Path) -> list[str]:
    """What ``esrerank train`` prints of a finished run: the kept epoch, what fitted β, each fusion."""
    info = summary["train"]
    lines = [f"best epoch {info['best_epoch']}: dev MAP {100 * info['best_dev_map']:.2f} on the "
             f"{info['dev_split']['select_queries']} dev queries that chose it "
             f"({info['seconds']:.0f} s on {info['device']}); checkpoint written to {out}",
             f"fusion β and calibration fitted on {summary['fusion']['fitted_on']}"]
    for stage, fit in summary["fusion"]["first_stages"].items():
        w = fit["weights"]
        lines.append(f"fused with {stage}: dev MAP {100 * fit['dev_map']:.2f} "
                     f"(first stage alone {100 * fit['first_stage_dev_map']:.2f}; "
                     f"β first_stage={w['first_stage']:.2f} bow={w['bow']:.2f} neural={w['neural']:.2f})")
    return lines


def _first_stage_scores(
    queries: Sequence[RankingQuery], preprocessor: Preprocessor
) -> dict[str, list[np.ndarray]]:
    """Per-query first-stage scores: the data's own (when every query has them), BM25, LM-Dirichlet.

    BM25 and LM-Dirichlet statistics come from every candidate of the dev queries, as in evaluation.
    """
    out: dict[str, list[np.ndarray]] = {}
    if all(rq.first_stage_scores is not None and not rq.split.startswith(PAIR_QUERIES) for rq in queries):
        out["given"] = [np.asarray(rq.first_stage_scores, dtype=np.float64) for rq in queries]
    collection = {c.id: c for rq in queries for c in rq.candidates}
    ids = list(collection)
    docs = [preprocessor.tokens(collection[i]) for i in ids]
    for name in FIRST_STAGES:
        index = EmbeddedIndex.build(docs, name, ids=ids)
        out[name] = [
            np.asarray(
                index.score(preprocessor.tokens(rq.query), [c.id for c in rq.candidates]), dtype=np.float64
            )
            for rq in queries
        ]
    return out
