"""``FORMAT:PATH`` data specs of the CLI: parse, check and read them.

FORMAT is one of semeval, pairs, mqp, askubuntu, stackexchange, jsonl (see
``es_plugin_bridge.data.readers``). Mistakes in a spec raise UserError with one line that names the
problem and lists the valid formats; malformed data raises DataFormatError naming file and line.
"""

from __future__ import annotations

from pathlib import Path

from es_plugin_bridge.data.readers import FORMATS, read
from es_plugin_bridge.data.types import Dataset
from es_plugin_bridge.errors import UserError


def _valid() -> str:
    return f"valid formats: {', '.join(FORMATS)}"


def parse_spec(spec: str) -> tuple[str, Path]:
    """Split ``FORMAT:PATH`` and check that the format is known and PATH exists with the right kind.

    Returns (format name, path). Raises UserError otherwise.
    """
    format_name, sep, path_text = spec.partition(":")
    format_name = format_name.strip().lower()
    if not sep or not format_name:
        raise UserError(f"data spec {spec!r} is not FORMAT:PATH ({_valid()})")
    if format_name not in FORMATS:
        raise UserError(f"data spec {spec!r}: unknown format {format_name!r} ({_valid()})")
    if not path_text.strip():
        raise UserError(f"data spec {spec!r}: no path after '{format_name}:' ({_valid()})")
    path = Path(path_text).expanduser()
    kind = FORMATS[format_name].kind
    if not path.exists():
        raise UserError(
            f"data spec {spec!r}: {path} does not exist ({format_name} reads a {kind}; {_valid()})"
        )
    if (kind == "directory" and not path.is_dir()) or (kind == "file" and not path.is_file()):
        raise UserError(
            f"data spec {spec!r}: {path} is not a {kind} ({format_name} reads a {kind}; {_valid()})"
        )
    return format_name, path


def read_spec(spec: str, *, skip_bad: bool = False) -> Dataset:
    """Read the Dataset a ``FORMAT:PATH`` spec names; ``skip_bad`` skips and counts malformed records."""
    format_name, path = parse_spec(spec)
    return read(format_name, path, skip_bad=skip_bad)
