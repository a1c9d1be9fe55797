"""``open_scorer(path)``: the one place that looks at a model directory's format.

A directory written by ``export-onnx`` (it has a manifest.json) is scored with onnxruntime; a training
checkpoint with PyTorch, imported only then, so evaluating an exported model never loads torch. Both
answer the same ``serving.scorer.Scorer`` contract with the same maths (``core.scoring``).
"""

from __future__ import annotations

from pathlib import Path

from es_plugin_bridge.serving.scorer import ExportedScorer, Scorer, is_exported


def open_scorer(path: str | Path) -> Scorer:
    """The scorer of a model directory: exported (onnxruntime) or a checkpoint (torch)."""
    path = Path(path)
    if is_exported(path):
        return ExportedScorer.from_dir(path)
    from es_plugin_bridge.training.torch_scorer import NeuralScorer  # torch: only for checkpoints

    return NeuralScorer.from_dir(path)


__all__ = ["open_scorer"]
