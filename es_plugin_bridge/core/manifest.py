"""manifest.json of a model directory: the sha256 and size of every other file in it.

A model directory is served as-is, so the server must know it holds exactly what the exporter
wrote: no file changed, none missing, none added (an added file could be a graph's external
data or anything else a loader might pick up). :func:`read_verified` hashes each file and hands
back the very bytes it hashed, so what is checked is what gets parsed (no window in which a file
can change between the check and the load). Only hashlib and json: no torch, no pickle.

The manifest proves integrity, not origin: anyone who can write the directory can rewrite the
manifest too. An operator who pins the manifest's own sha256 (``esrerank serve --expect-sha256``,
printed by ``export-onnx`` and at start-up) refuses a directory someone else rewrote.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from es_plugin_bridge.errors import UserError

MANIFEST = "manifest.json"
FORMAT = "es_plugin_bridge.manifest"
VERSION = 1


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_manifest(directory: Path) -> dict[str, Any]:
    """Hash every regular file of ``directory`` (flat, manifest excluded) into manifest.json."""
    directory = Path(directory)
    files: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.iterdir()):
        if path.name == MANIFEST:
            continue
        if not path.is_file() or path.is_symlink():
            raise ValueError(f"{path}: a model directory holds regular files only")
        data = path.read_bytes()
        files[path.name] = {"sha256": _digest(data), "size": len(data)}
    manifest = {"format": FORMAT, "version": VERSION, "algorithm": "sha256", "files": files}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def manifest_digest(directory: Path) -> str:
    """sha256 of ``directory``'s manifest.json: one digest that pins every file of the directory."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise UserError(f"{directory}: {MANIFEST} is missing (not an exported model directory)")
    return _digest(path.read_bytes())


def _read_manifest(directory: Path, expect_sha256: str | None = None) -> dict[str, dict[str, Any]]:
    path = directory / MANIFEST
    if not path.is_file():
        raise UserError(f"{directory}: {MANIFEST} is missing (not an exported model directory)")
    raw = path.read_bytes()
    if expect_sha256 is not None and _digest(raw) != expect_sha256.strip().lower():
        raise UserError(f"{path}: sha256 is {_digest(raw)}, not the expected {expect_sha256.strip()}; "
                        "refusing a model directory that was rewritten")
    try:
        manifest = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise UserError(f"{path}: not a model manifest (expected format {FORMAT!r})")
    if manifest.get("version") != VERSION or manifest.get("algorithm") != "sha256":
        raise UserError(f"{path}: unsupported manifest version or algorithm")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise UserError(f"{path}: 'files' is missing or not an object")
    for name, entry in files.items():
        if name in ("", ".", "..", MANIFEST) or "/" in name or "\\" in name:
            raise UserError(f"{path}: invalid file name {name!r}")
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("size"), int)
        )
        if not ok:
            raise UserError(f"{path}: entry {name!r} needs a sha256 string and an integer size")
    return files


def read_verified(directory: Path, required: tuple[str, ...] = (),
                  expect_sha256: str | None = None) -> dict[str, bytes]:
    """Bytes of every file listed in manifest.json, after checking the directory matches it exactly.

    UserError naming the offending file when one is missing, added, not a regular file, or has a
    different size or sha256; when the manifest does not list a ``required`` file; or, with
    ``expect_sha256``, when the manifest itself is not the pinned one (checked on the very bytes parsed).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise UserError(f"model directory not found: {directory}")
    files = _read_manifest(directory, expect_sha256)
    for name in required:
        if name not in files:
            raise UserError(f"{directory / MANIFEST}: does not list the required file {name}")
    present = {p.name for p in directory.iterdir()} - {MANIFEST}
    for name in sorted(present - set(files)):
        raise UserError(f"{directory / name}: not listed in {MANIFEST}; refusing a directory with extra file")
    contents: dict[str, bytes] = {}
    for name, entry in sorted(files.items()):
        path = directory / name
        if name not in present:
            raise UserError(f"{path}: listed in {MANIFEST} but missing")
        if path.is_symlink() or not path.is_file():
            raise UserError(f"{path}: not a regular file")
        data = path.read_bytes()
        if len(data) != entry["size"] or _digest(data) != entry["sha256"]:
            raise UserError(
                f"{path}: content does not match {MANIFEST} (sha256/size differ: file changed or corrupted)"
            )
        contents[name] = data
    return contents
