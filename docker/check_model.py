"""The sidecar container's entry point in the compose stack: check the mounted model, then serve.

Docker mounts a missing host directory as an empty folder, and the sidecar would then never become
healthy with no hint of what to run. So before ``esrerank serve`` this says in one line which host
path holds no exported model and the command that creates it, and exits 1: the services that wait
for a healthy sidecar do not start, and ``docker compose up`` fails. Standard library only.

    python check_model.py MODEL_DIR -- COMMAND...    (COMMAND runs in place of this process)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HOST_PATH_ENV = "ESRERANK_MODEL_DIR_ON_HOST"


def problem(model_dir: Path, host_path: str) -> str | None:
    """The one-line error for a directory without an exported model; None when it has one."""
    if (model_dir / "manifest.json").is_file():
        return None
    where = f"{host_path} (relative to docker/)" if not host_path.startswith("/") else host_path
    return (f"error: no exported model in {where}, the ESRERANK_MODEL_DIR mounted at {model_dir}: "
            "create it with `make demo` (it writes runs/demo/transformer-onnx), or run "
            "`esrerank export-onnx CHECKPOINT_DIR --out DIR` and set ESRERANK_MODEL_DIR=DIR "
            "(remove any empty directory Docker left at the path first)")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: check_model.py MODEL_DIR -- COMMAND...", file=sys.stderr)
        return 2
    message = problem(Path(argv[0]), os.environ.get(HOST_PATH_ENV, argv[0]))
    if message:
        print(message, file=sys.stderr)
        return 1
    os.execvp(argv[2], argv[2:])
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
