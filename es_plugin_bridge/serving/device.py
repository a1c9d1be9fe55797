"""Which onnxruntime execution provider scores: ``--device auto|cpu|cuda``.

The GPU image installs ``onnxruntime-gpu``, whose ``get_available_providers()`` lists
``CUDAExecutionProvider`` whether or not a device is there; onnxruntime then quietly falls back to the
CPU when the session cannot use one. So the choice is made twice, both times by pure functions of
provider lists (tested without a GPU): :func:`requested_providers` before the session (from what the
installed onnxruntime offers), :func:`check_active` after it (from what the session really uses).
``auto`` takes CUDA when it works and says in one log line when CUDA was installed but unusable (with
the CPU-only wheel, CPU is simply the choice: ``serve`` names the provider when it starts); ``cuda``
refuses to start on the CPU, since a GPU deployment scoring 20× slower should fail loudly, not at p99.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from es_plugin_bridge.errors import UserError

Device = Literal["auto", "cpu", "cuda"]
DEVICES: tuple[Device, ...] = ("auto", "cpu", "cuda")
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


def requested_providers(device: Device, available: Sequence[str]) -> list[str]:
    """The providers to ask the session for, best first.

    ``available`` is ``onnxruntime.get_available_providers()``. UserError for ``cuda`` when the
    installed onnxruntime has no CUDA provider (the CPU-only wheel), naming the package to install.
    """
    if device not in DEVICES:
        raise UserError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device == "cpu":
        return [CPU]
    if CUDA in available:
        return [CUDA, CPU]
    if device == "cuda":
        raise UserError("--device cuda: this onnxruntime has no CUDAExecutionProvider (providers: "
                        f"{', '.join(available) or 'none'}); install onnxruntime-gpu instead of onnxruntime")
    return [CPU]


def check_active(device: Device, requested: Sequence[str], active: Sequence[str]) -> tuple[str, str | None]:
    """(the provider that scores, a note to log when CUDA was asked for but the session runs on CPU).

    ``active`` is ``session.get_providers()``: onnxruntime drops CUDA from it when no device (or no
    CUDA/cuDNN library) could be used. UserError for ``cuda`` in that case.
    """
    provider = active[0] if active else CPU
    if CUDA in requested and provider != CUDA:
        if device == "cuda":
            raise UserError("--device cuda: onnxruntime-gpu could not use a CUDA device (no GPU visible, or "
                            "CUDA/cuDNN libraries missing); use --device auto or cpu to score on the CPU")
        return provider, ("device auto: CUDAExecutionProvider is installed but no CUDA device is usable; "
                          "scoring on CPU")
    return provider, None
