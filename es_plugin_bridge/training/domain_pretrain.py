"""In-domain pre-training of a sentence encoder with TSDAE, before it is fine-tuned on duplicates.

The lesson all four papers share is that pre-training on the site's own unlabelled text matters most
(Lei et al. pre-train their encoder as an encoder–decoder on AskUbuntu's titles and bodies). TSDAE
(Wang, Reimers and Gurevych, 2021) is that idea for a transformer sentence encoder: each text is
damaged by deleting 60 % of its words, the encoder turns the damaged text into one pooled vector, and a
decoder that sees only that vector must rebuild the original text. The decoder is the same network
(weights tied, as in the paper), with cross-attention to the vector, so the vector has to carry what the
text says — exactly what duplicate search compares. sentence-transformers' ``DenoisingAutoEncoderLoss``
does the modelling; this module feeds it the site's texts as the model will read them, keeps to a time
budget, and writes a sentence-transformers directory that ``train --init DIR`` starts from.

The texts are those the fine-tuned model reads: each question's preprocessed title and cut body as one
text (``serving.tokenizer.question_text``), and each unlabelled comment (SemEval's) as one text. The
deletion works on those whitespace-separated tokens with a seeded generator, so a run is reproducible.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from es_plugin_bridge.data.corpus import distinct_questions
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.transformer import check_init, default_init
from es_plugin_bridge.serving.tokenizer import question_text
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.device import resolve_device, use_bf16

log = logging.getLogger(__name__)

SUMMARY = "pretrain.json"
PLOT = "pretrain.png"


@dataclass(frozen=True)
class PretrainOptions:
    """How long and how hard to pre-train. The defaults are the TSDAE paper's (batch 8, constant
    learning rate 3e-5, 60 % of the words deleted), with the transformer type's 128 sub-words."""

    time_budget: float | None = 600.0  # seconds, the whole run (loading and saving excluded)
    max_steps: int | None = None
    batch_size: int = 8
    lr: float = 3e-5
    deletion: float = 0.6
    max_length: int = 128
    seed: int = 1
    device: str = "auto"
    mixed_precision: bool = True
    show_progress: bool = True

    def check(self) -> None:
        """UserError naming the first option out of range (before any model is loaded)."""
        if self.time_budget is None and self.max_steps is None:
            raise UserError("pre-training needs a stop: give --time-budget or --max-steps")
        if self.time_budget is not None and self.time_budget <= 0:
            raise UserError(f"--time-budget must be positive, got {self.time_budget}")
        if self.max_steps is not None and self.max_steps < 1:
            raise UserError(f"--max-steps must be at least 1, got {self.max_steps}")
        if self.batch_size < 1:
            raise UserError(f"--batch-size must be at least 1, got {self.batch_size}")
        if not 0 < self.lr < 1:
            raise UserError(f"--lr must be in (0, 1), got {self.lr}")
        if not 0 <= self.deletion < 1:
            raise UserError(f"--deletion must be in [0, 1), got {self.deletion}")
        if not 8 <= self.max_length <= 512:
            raise UserError(f"--max-length must be in [8, 512], got {self.max_length}")


@dataclass
class Corpus:
    """The texts to pre-train on, with per-source counts for the summary."""

    texts: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)


def domain_texts(specs: Sequence[str], options: TextOptions | None = None, skip_bad: bool = False) -> Corpus:
    """Every distinct question (title + cut body, as the transformer reads it) and every unlabelled
    comment of each ``FORMAT:PATH`` spec, each text once; UserError when none holds any text."""
    pre = Preprocessor(options or TextOptions())
    corpus, seen = Corpus(), set()
    for spec in specs:
        ds = read_spec(spec, skip_bad=skip_bad)
        counts = {"spec": spec, "questions": 0, "comments": 0, "skipped": ds.skipped}
        items = [("questions", question_text(pre, q)) for q in distinct_questions(ds)]
        items += [("comments", " ".join(pre.text_tokens(text))) for text in ds.unlabelled]
        for kind, text in items:
            if text and text not in seen:
                seen.add(text)
                corpus.texts.append(text)
                counts[kind] += 1
        corpus.sources.append(counts)
    if not corpus.texts:
        raise UserError(f"no text to pre-train on in {', '.join(specs)}")
    return corpus


def delete_words(text: str, ratio: float, rng: np.random.Generator) -> str:
    """TSDAE's noise: drop each word with probability ``ratio``, keeping at least one."""
    words = text.split()
    if not words:
        return text
    keep = rng.random(len(words)) >= ratio
    if not keep.any():
        keep[rng.integers(len(words))] = True
    return " ".join(w for w, k in zip(words, keep, strict=True) if k)


def _load(init: Path, device: str, max_length: int, show_progress: bool) -> tuple[Any, Any]:
    """The sentence encoder and its TSDAE loss (the decoder tied to it), both on ``device``."""
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss

    verbosity = transformers.logging.get_verbosity()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()  # the decoder's new cross-attention is expected, not news
    if not show_progress:
        transformers.utils.logging.disable_progress_bar()
    try:
        model = SentenceTransformer(str(init), device=device, local_files_only=True)
        model.max_seq_length = max_length
        loss = DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True).to(device)
    finally:  # both are process-wide: leave them as the caller had them
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.utils.logging.enable_progress_bar()
    return model, loss


def _features(model: Any, texts: list[str], device: str) -> dict[str, Any]:
    feats = model.preprocess(texts) if hasattr(model, "preprocess") else model.tokenize(texts)
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in feats.items()}


def pretrain_tsdae(
    corpus: Corpus, out: Path, options: PretrainOptions, init: Path | None = None
) -> dict[str, Any]:
    """Pre-train the encoder at ``init`` (default: the packaged MiniLM) on ``corpus`` with TSDAE and
    write it to ``out`` as a sentence-transformers directory; the summary (also ``out/pretrain.json``).

    ``out`` appears only when the run is complete (written beside it, then renamed), and is refused
    when it already exists, so a finished run is never overwritten by accident.
    """
    import torch
    from tqdm import tqdm

    options.check()
    out = Path(out)
    if out.exists():
        raise UserError(f"--out {out}: already exists (pre-training writes a new directory)")
    init_dir = check_init(Path(init)) if init is not None else default_init()
    device = resolve_device(options.device, torch.cuda.is_available(), torch.__version__)
    bf16 = use_bf16(device, device == "cuda" and torch.cuda.is_bf16_supported(), options.mixed_precision)
    torch.manual_seed(options.seed)
    rng = np.random.default_rng(options.seed)
    model, loss_fn = _load(init_dir, device, options.max_length, options.show_progress)
    optimizer = torch.optim.AdamW(loss_fn.parameters(), lr=options.lr)
    loss_fn.train()

    started = time.monotonic()
    history: list[dict[str, float]] = []
    steps, seen, window, step_seconds = 0, 0, [], 0.0
    stopped = "max steps"
    total = options.max_steps or None
    bar = tqdm(total=total, desc="TSDAE", unit="step", disable=not options.show_progress)
    order = rng.permutation(len(corpus.texts))
    position = 0
    while options.max_steps is None or steps < options.max_steps:
        if options.time_budget is not None:
            left = options.time_budget - (time.monotonic() - started)
            if left <= step_seconds * 1.5:  # another step would end past the budget
                stopped = "time budget"
                break
        if position >= len(order):
            order, position = rng.permutation(len(corpus.texts)), 0
        batch = [corpus.texts[i] for i in order[position : position + options.batch_size]]
        position += options.batch_size
        step_start = time.monotonic()
        noisy = [delete_words(t, options.deletion, rng) for t in batch]
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn([_features(model, noisy, device), _features(model, batch, device)], None)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value = float(loss.item())
        if not math.isfinite(value):
            raise UserError(f"TSDAE loss is {value} at step {steps + 1}: lower --lr")
        steps += 1
        seen += len(batch)
        window.append(value)
        step_seconds = max(step_seconds * 0.9, time.monotonic() - step_start)  # cautious: slow steps count
        bar.update(1)
        fields = {"loss": f"{np.mean(window[-50:]):.3f}"}
        if options.time_budget is not None:
            fields["left"] = f"{max(0.0, options.time_budget - (time.monotonic() - started)):.0f}s"
        bar.set_postfix(fields)
        if steps % 25 == 0:
            history.append(_point(steps, window, started))
            window = []
    bar.close()
    if window:
        history.append(_point(steps, window, started))
    seconds = time.monotonic() - started
    summary = {
        "objective": "tsdae",
        "init": str(init_dir),
        "options": asdict(options),
        "device": f"{device}{', bf16' if bf16 else ''}",
        "corpus": {"texts": len(corpus.texts), "sources": corpus.sources},
        "steps": steps,
        "texts_seen": seen,
        "epochs": seen / len(corpus.texts),
        "stopped": stopped,
        "seconds": seconds,
        "step_seconds": step_seconds,  # the cautious estimate of one step the budget stop went by
        "history": history,
    }
    _save(model, out, summary)
    log.debug("TSDAE: %d steps (%d texts, %.2f passes over the corpus) in %.0f s; %s",
             steps, seen, seen / len(corpus.texts), seconds, out)
    return summary


def _point(step: int, losses: list[float], started: float) -> dict[str, float]:
    return {"step": step, "loss": float(np.mean(losses)), "seconds": time.monotonic() - started}


def _save(model: Any, out: Path, summary: dict[str, Any]) -> None:
    """Write the encoder, the summary and the loss plot beside ``out``, then rename into place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    st_log = logging.getLogger("sentence_transformers")
    level = st_log.level
    st_log.setLevel(logging.WARNING)  # its "Saving model to <temporary name>" would name the wrong place
    try:
        model.save(str(tmp))  # its "Writing model shards" bar: a second at most
        (tmp / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        _plot(summary["history"], tmp / PLOT)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        st_log.setLevel(level)


def _plot(history: list[dict[str, float]], path: Path) -> None:
    """The reconstruction loss against steps: whether more pre-training would still help."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([h["step"] for h in history], [h["loss"] for h in history], marker=".")
    ax.set_xlabel("step")
    ax.set_ylabel("TSDAE loss (mean over 25 steps)")
    ax.set_title("in-domain pre-training")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


__all__ = ["Corpus", "PretrainOptions", "delete_words", "domain_texts", "pretrain_tsdae"]
