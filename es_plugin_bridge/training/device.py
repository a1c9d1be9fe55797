"""Where training runs: ``--device auto|cpu|cuda`` and whether to use mixed precision there.

Pure functions of what torch reports, so the choice is tested on a machine without a GPU: ``auto``
takes CUDA when torch sees a device, ``cuda`` refuses to train on the CPU (a run meant for a GPU that
quietly takes 20× longer should fail at once, not after hours). Mixed precision is bfloat16 autocast
on a GPU that supports it — no loss scaling needed, and the matrix products of the transformer and the
papers' encoders run on tensor cores; float32 everywhere else (CPU autocast would only slow the
recurrent models down).
"""

from __future__ import annotations

from typing import Literal

from es_plugin_bridge.errors import UserError

TrainDevice = Literal["auto", "cpu", "cuda"]
TRAIN_DEVICES: tuple[TrainDevice, ...] = ("auto", "cpu", "cuda")


def resolve_device(asked: str, cuda_available: bool, torch_version: str = "") -> str:
    """``"cuda"`` or ``"cpu"`` for ``--device asked``; UserError for ``cuda`` without a visible GPU."""
    if asked not in TRAIN_DEVICES:
        raise UserError(f"--device must be one of {', '.join(TRAIN_DEVICES)}, got {asked!r}")
    if asked == "cpu":
        return "cpu"
    if cuda_available:
        return "cuda"
    if asked == "cuda":
        build = f" (torch {torch_version}{': a CPU-only build' if '+cpu' in torch_version else ''})"
        raise UserError(f"--device cuda: torch sees no CUDA device{build if torch_version else ''}; "
                        "use --device auto or cpu, or install a CUDA build of torch on a GPU machine")
    return "cpu"


def use_bf16(device: str, bf16_supported: bool, asked: bool = True) -> bool:
    """Whether to train under bfloat16 autocast: on a GPU that supports it, unless turned off."""
    return asked and device == "cuda" and bf16_supported


__all__ = ["TRAIN_DEVICES", "TrainDevice", "resolve_device", "use_bf16"]
