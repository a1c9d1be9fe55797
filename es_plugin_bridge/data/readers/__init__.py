"""One reader per SPEC format; each turns a file or directory into a Dataset.

``FORMATS`` maps a format name to its reader and to the kind of path it takes ("file" or
"directory"); ``es_plugin_bridge.data.spec`` resolves ``FORMAT:PATH`` against it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from es_plugin_bridge.data.readers.askubuntu import read_askubuntu
from es_plugin_bridge.data.readers.jsonl import read_jsonl
from es_plugin_bridge.data.readers.mqp import read_mqp
from es_plugin_bridge.data.readers.pairs import read_pairs
from es_plugin_bridge.data.readers.semeval import read_semeval
from es_plugin_bridge.data.readers.stackexchange import read_stackexchange
from es_plugin_bridge.data.types import Dataset


@dataclass(frozen=True)
class Format:
    """A SPEC format: its reader, the kind of path it reads and a one-line description."""

    name: str
    read: Callable[..., Dataset]
    kind: Literal["file", "directory"]
    description: str


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("semeval", read_semeval, "file", "SemEval-2016 Task 3 XML (ranking queries)"),
        Format("pairs", read_pairs, "file", "TSV label<TAB>q1<TAB>q2 (duplicate pairs)"),
        Format("mqp", read_mqp, "file", "Medical Question Pairs CSV dr_id,q1,q2,label"),
        Format("askubuntu", read_askubuntu, "directory", "Lei et al. 2016 AskUbuntu release"),
        Format("stackexchange", read_stackexchange, "directory", "dump with Posts.xml and PostLinks.xml"),
        Format("jsonl", read_jsonl, "file", "JSON Lines questions, pairs or ranking queries"),
    )
}


def read(format_name: str, path: Path, *, skip_bad: bool = False) -> Dataset:
    """Read ``path`` with the reader of ``format_name`` (a key of FORMATS)."""
    return FORMATS[format_name].read(Path(path), skip_bad=skip_bad)


__all__ = [
    "FORMATS",
    "Format",
    "read",
    "read_askubuntu",
    "read_jsonl",
    "read_mqp",
    "read_pairs",
    "read_semeval",
    "read_stackexchange",
]
