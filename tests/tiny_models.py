"""The tiny real models the tests share: one checkpoint per model type, trained one epoch on 400 real
AskUbuntu title pairs, and its exported (ONNX) model directory.

Kept apart from ``conftest.py`` so that importing the fixtures costs nothing: torch and the trainer
are imported only when a model is built. ``python tests/tiny_models.py DIR`` builds the exported
directories into ``DIR/<type>`` with a torch install, so that a torch-free venv can run the sidecar
tests against them (``ESRERANK_TEST_MODELS=DIR``, see ``make test-serving-notorch``).
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
TINY_TYPES = {"bow-cnn": {"conv_units": 24}, "gru": {"hidden_dim": 16}}
#: A directory holding prebuilt ``<type>/`` exported model directories; the ``exported`` fixture then
#: needs no torch.
PREBUILT_ENV = "ESRERANK_TEST_MODELS"


def prebuilt_models() -> dict[str, Path] | None:
    """The exported directories named by ``ESRERANK_TEST_MODELS``, or None when it is unset.

    A set variable that lacks a model type is an error, not a silent rebuild: the caller asked for
    those exact directories.
    """
    root = os.environ.get(PREBUILT_ENV)
    if not root:
        return None
    found = {name: Path(root) / name for name in TINY_TYPES}
    missing = [str(path) for path in found.values() if not (path / "manifest.json").is_file()]
    if missing:
        raise FileNotFoundError(f"{PREBUILT_ENV}={root}: no exported model in {', '.join(missing)} "
                                "(build them with `python tests/tiny_models.py DIR`)")
    return found


def build_checkpoints(root: Path) -> dict[str, Path]:
    """Train one tiny checkpoint per type under ``root`` (one thread: the result must not depend on
    how many cores the machine has)."""
    import torch  # heavy: only a test that uses a checkpoint pays for it

    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.training.trainer import TrainConfig, Trainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
        random.Random(5).shuffle(lines)
        root.mkdir(parents=True, exist_ok=True)
        (root / "train.tsv").write_text("".join(lines[:400]), encoding="utf-8")
        (root / "dev.tsv").write_text("".join(lines[400:550]), encoding="utf-8")
        train, dev = read_spec(f"pairs:{root / 'train.tsv'}"), read_spec(f"pairs:{root / 'dev.tsv'}")
        out = {}
        for model_type, hyper in TINY_TYPES.items():
            # held-out: the tiny models' β then weigh the first stage (tests of the fusion need β_fs > 0)
            cfg = TrainConfig(model_type=model_type, epochs=1, examples_per_epoch=150, embedding_dim=16,
                              hyper=hyper, show_progress=False, max_dev_queries=30, negatives=3,
                              fusion_fit="held-out")
            Trainer(cfg, [train], [dev], root / model_type).run()
            out[model_type] = root / model_type
        return out
    finally:
        torch.set_num_threads(threads)


def export_models(checkpoints: dict[str, Path], root: Path) -> dict[str, Path]:
    """Export every checkpoint to ``root/<type>``; the ONNX graph must reproduce torch within 1e-4."""
    from exporters.export import export_checkpoint

    for model_type, path in checkpoints.items():
        result = export_checkpoint(path, root / model_type)
        assert result.max_abs_diff <= 1e-4 and result.score_max_abs_diff <= 1e-4
    return {model_type: root / model_type for model_type in checkpoints}


#: The tiny cross-encoder: pairs of at most 32 sub-words, a few steps of 8 positives with 2 negatives.
PAIR_HYPER = {"max_length": 32}


def build_pair_model(root: Path) -> tuple[Path, Path]:
    """A cross-encoder (the packaged MiniLM's network, a new head) trained a few steps on 200 real
    AskUbuntu title pairs, and its export: (checkpoint, model directory). Two threads, as CI has."""
    import torch

    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.training.trainer import TrainConfig, Trainer
    from exporters.export import export_checkpoint

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
        random.Random(11).shuffle(lines)
        root.mkdir(parents=True, exist_ok=True)
        (root / "train.tsv").write_text("".join(lines[:200]), encoding="utf-8")
        (root / "dev.tsv").write_text("".join(lines[200:260]), encoding="utf-8")
        cfg = TrainConfig(model_type="cross-encoder", epochs=1, examples_per_epoch=24, batch_size=8,
                          negatives=2, hyper=PAIR_HYPER, show_progress=False, max_dev_queries=8,
                          dev_window=20)
        Trainer(cfg, [read_spec(f"pairs:{root / 'train.tsv'}")], [read_spec(f"pairs:{root / 'dev.tsv'}")],
                root / "checkpoint").run()
        result = export_checkpoint(root / "checkpoint", root / "exported", max_questions=24)
        assert result.max_abs_diff <= 1e-4 and result.score_max_abs_diff <= 1e-4
        return root / "checkpoint", root / "exported"
    finally:
        torch.set_num_threads(threads)


def main(argv: list[str]) -> int:
    """``python tests/tiny_models.py DIR``: build the exported models into ``DIR`` unless there."""
    if len(argv) != 1:
        print("usage: python tests/tiny_models.py DIR", file=sys.stderr)
        return 2
    root = Path(argv[0])
    if all((root / name / "manifest.json").is_file() for name in TINY_TYPES):
        print(f"tiny_models: {root} already holds {', '.join(TINY_TYPES)}")
        return 0
    export_models(build_checkpoints(root / "checkpoints"), root)
    print(f"tiny_models: exported {', '.join(TINY_TYPES)} to {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
