"""``esrerank train --device auto|cpu|cuda``: where training runs, and that it never quietly falls back.

The choice is a pure function of what torch reports (``training.device``), so both sides are tested
here on a machine without a GPU; the CUDA run itself is measured by ``benchmarks/training.py --device
cuda`` where a GPU is lent (``benchmarks/training_gpu.json`` says whether one was)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.training.device import resolve_device, use_bf16

TITLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / \
    "train_titles.tsv"


@pytest.mark.parametrize(("asked", "cuda", "expected"), [
    ("auto", False, "cpu"), ("auto", True, "cuda"), ("cpu", True, "cpu"), ("cpu", False, "cpu"),
    ("cuda", True, "cuda"),
])
def test_the_device_asked_and_what_torch_sees_decide_where_training_runs(asked, cuda, expected):
    assert resolve_device(asked, cuda, "2.13.0") == expected


def test_cuda_without_a_gpu_is_refused_naming_a_cpu_only_build():
    with pytest.raises(UserError, match=r"--device cuda: torch sees no CUDA device \(torch 2.13.0\+cpu: a "
                                        r"CPU-only build\); use --device auto or cpu"):
        resolve_device("cuda", False, "2.13.0+cpu")
    with pytest.raises(UserError, match="--device must be one of auto, cpu, cuda, got 'gpu'"):
        resolve_device("gpu", True)


def test_bf16_autocast_only_on_a_gpu_that_supports_it_and_when_asked():
    assert use_bf16("cuda", True) and not use_bf16("cuda", False) and not use_bf16("cpu", True)
    assert not use_bf16("cuda", True, asked=False)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> dict[str, Path]:
    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(11).shuffle(lines)
    root = tmp_path_factory.mktemp("device-pairs")
    (root / "train.tsv").write_text("".join(lines[:300]), encoding="utf-8")
    (root / "dev.tsv").write_text("".join(lines[300:400]), encoding="utf-8")
    return {"train": root / "train.tsv", "dev": root / "dev.tsv"}


SMALL = ["--model-type", "gru", "--hyper", "hidden_dim=16", "--embedding-dim", "16", "--no-word2vec",
         "--epochs", "1", "--examples-per-epoch", "60", "--negatives", "3", "--quiet", "--threads", "1"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_train_device_cuda_on_a_cpu_machine_is_one_error_line_and_writes_nothing(pairs, tmp_path, cli):
    out = tmp_path / "ckpt"
    code, _, err = cli(["train", *SMALL, "--train", f"pairs:{pairs['train']}", "--dev",
                        f"pairs:{pairs['dev']}", "--out", str(out), "--device", "cuda"])
    assert code == 2
    assert err.strip().startswith("error: --device cuda: torch sees no CUDA device")
    assert "Traceback" not in err
    assert not out.exists()


def test_train_records_the_device_it_ran_on(pairs, tmp_path, cli):
    out = tmp_path / "ckpt"
    code, stdout, err = cli(["train", *SMALL, "--train", f"pairs:{pairs['train']}", "--dev",
                             f"pairs:{pairs['dev']}", "--out", str(out), "--device", "cpu"])
    assert code == 0, err
    assert " s on cpu); checkpoint written to " in stdout
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["train"]["device"] == "cpu"


def test_max_dev_queries_caps_the_dev_evaluation_and_a_budget_it_would_eat_is_warned_of(pairs, tmp_path, cli,
                                                                                        caplog):
    """``--max-dev-queries N`` evaluates N dev queries each epoch (a cross-encoder's evaluation costs a
    network pass per candidate); when the evaluations the budget must keep room for would take half of
    it, train says so and names the two options that help."""
    out = tmp_path / "ckpt"
    data = ["--train", f"pairs:{pairs['train']}", "--dev", f"pairs:{pairs['dev']}"]
    code, _, err = cli(["train", *SMALL, *data, "--out", str(out), "--max-dev-queries", "7"])
    assert code == 0, err
    train = json.loads((out / "config.json").read_text(encoding="utf-8"))["train"]
    assert train["config"]["max_dev_queries"] == 7 and train["dev_queries"] == 7
    caplog.set_level("WARNING")
    code, _, err = cli(["train", *SMALL, *data, "--out", str(tmp_path / "tight"), "--time-budget", "1"])
    assert code == 0, err
    warned = [r.getMessage() for r in caplog.records if "dev evaluation" in r.getMessage()]
    assert len(warned) == 1 and "--max-dev-queries N" in warned[0] and "budget leaves about" in warned[0]
