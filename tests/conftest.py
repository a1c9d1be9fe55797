"""Shared fixtures: ``cli`` runs a console script's entry point in process; ``checkpoints`` and
``exported`` are tiny real models (trained on real AskUbuntu pairs, then exported to ONNX)."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from es_plugin_bridge.cli.main import main as esrerank_main
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.training.trainer import TrainConfig, Trainer
from exporters.export import export_checkpoint

SAMPLES = Path(__file__).resolve().parents[1] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
TINY_TYPES = {"bow-cnn": {"conv_units": 24}, "gru": {"hidden_dim": 16}}

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys) -> RunCli:
    """``cli(argv, main=esrerank_main) -> (exit code, stdout, stderr)``, as the console script would end."""

    def run(argv: list[str], main: Callable[[list[str]], None] = esrerank_main) -> tuple[int, str, str]:
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """One tiny checkpoint per model type, trained one epoch on 400 real AskUbuntu title pairs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(5).shuffle(lines)
    root = tmp_path_factory.mktemp("ckpt")
    (root / "train.tsv").write_text("".join(lines[:400]), encoding="utf-8")
    (root / "dev.tsv").write_text("".join(lines[400:550]), encoding="utf-8")
    train, dev = read_spec(f"pairs:{root / 'train.tsv'}"), read_spec(f"pairs:{root / 'dev.tsv'}")
    out = {}
    for model_type, hyper in TINY_TYPES.items():
        cfg = TrainConfig(model_type=model_type, epochs=1, examples_per_epoch=150, embedding_dim=16,
                          hyper=hyper, show_progress=False, max_dev_queries=30, negatives=3)
        Trainer(cfg, [train], [dev], root / model_type).run()
        out[model_type] = root / model_type
    yield out
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def exported(checkpoints, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("exported")
    for model_type, path in checkpoints.items():
        result = export_checkpoint(path, root / model_type)
        assert result.max_abs_diff <= 1e-4 and result.score_max_abs_diff <= 1e-4
    return {model_type: root / model_type for model_type in checkpoints}
