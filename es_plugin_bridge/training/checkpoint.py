"""Checkpoint directories: weights in safetensors, everything else in JSON — nothing executes code.

Layout written by ``esrerank train --out DIR``::

    config.json        model config (build_model arguments), text options, input caps, recipe,
                       fusion weights (β), training summary, versions
    vocab.json         the Vocabulary
    model.safetensors  the model's state dict
    history.json       per-epoch loss and dev metric
    training.png       the same, plotted

A model family may add files (``ModelFamily.save_files``): a transformer's ``transformer_config.json``
(the network's sizes) and ``tokenizer.json``, so it rebuilds without the directory it was initialised from.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from es_plugin_bridge import __version__
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models import QuestionSimilarityModel
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.families import family_of
from es_plugin_bridge.training.featurize import Featurizer

CONFIG = "config.json"
VOCAB = "vocab.json"
WEIGHTS = "model.safetensors"
FORMAT = "es_plugin_bridge.checkpoint"


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temp file + rename) so a crash never leaves half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


def save_checkpoint(out: Path, model: Any, featurizer: Featurizer, extra: dict[str, Any]) -> None:
    """Save weights, vocabulary and config into ``out`` (created if needed)."""
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    tmp = out / f".{WEIGHTS}.tmp"
    save_file(state, str(tmp))
    os.replace(tmp, out / WEIGHTS)
    featurizer.vocab.save(out / VOCAB)
    family_of(model.model_type).save_files(model, out)  # e.g. a transformer's network config and tokenizer
    config = {
        "format": FORMAT,
        "version": __version__,
        "torch_version": torch.__version__,
        "model": model.config(),
        "text": featurizer.preprocessor.options.model_dump(mode="json"),
        "max_title": featurizer.max_title,
        "max_body": featurizer.max_body,
        **extra,
    }
    write_json(out / CONFIG, config)


def read_config(directory: Path) -> dict[str, Any]:
    """config.json of a checkpoint directory; UserError naming what is missing or wrong."""
    path = Path(directory) / CONFIG
    if not Path(directory).is_dir():
        raise UserError(f"model directory not found: {directory}")
    if not path.is_file():
        raise UserError(f"{directory} is not a checkpoint directory: {CONFIG} is missing")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if config.get("format") != FORMAT:
        raise UserError(f"{path}: not a training checkpoint (format {config.get('format')!r})")
    return config


def load_checkpoint(directory: Path) -> tuple[QuestionSimilarityModel, Featurizer, dict[str, Any]]:
    """Rebuild model (eval mode) and featurizer from a checkpoint directory."""
    directory = Path(directory)
    config = read_config(directory)
    vocab = Vocabulary.load(directory / VOCAB)
    family = family_of(config["model"].get("model_type", ""))
    model = family.rebuild(directory, config["model"])
    weights = directory / WEIGHTS
    if not weights.is_file():
        raise UserError(f"{directory}: {WEIGHTS} is missing")
    state = load_file(str(weights))
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise UserError(f"{weights}: weights do not fit the model in {CONFIG}: {exc}") from None
    model.eval()
    options = TextOptions.from_mapping(config["text"], source=str(directory / CONFIG))
    preprocessor = Preprocessor(options)
    featurizer = family.featurizer(model, preprocessor, vocab, config["max_title"], config["max_body"])
    return model, featurizer, config
