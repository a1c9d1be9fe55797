"""Training curves as a PNG: loss per epoch and the dev metric per epoch, side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot_history(history: Sequence[Mapping[str, float]], path: Path, title: str) -> None:
    """Write ``path`` from history rows with keys epoch, loss, dev_map."""
    epochs = [row["epoch"] for row in history]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    losses = [float("nan") if row["loss"] is None else row["loss"] for row in history]  # epoch 0: none
    left.plot(epochs, losses, marker="o")
    left.set_xlabel("epoch")
    left.set_ylabel("training loss")
    right.plot(epochs, [100 * row["dev_map"] for row in history], marker="o", color="tab:green")
    right.set_xlabel("epoch")
    right.set_ylabel("dev MAP (%)")
    fig.suptitle(title)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
