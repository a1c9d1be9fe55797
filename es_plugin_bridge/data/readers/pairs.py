"""``pairs``: TSV lines ``label<TAB>question1<TAB>question2`` (AskUbuntu, Quora, Meta Stack Exchange).

A label is ``duplicate`` | ``non-duplicate`` (or ``1`` | ``0``). A question is a title, optionally
followed directly by its HTML body (``How do I ...?<p>I have ...</p>``); it is split at the first
block-level tag. Ids are hashes of the text (``question_id``), so the same question in two pairs is
one Question.
Blank lines carry no record and are passed over; every other line must be a valid pair.
"""

from __future__ import annotations

from pathlib import Path

from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.readers._common import RecordError, add_questions, parse_label, read_line_file
from es_plugin_bridge.data.types import Dataset, Pair


def read_pairs(path: Path, *, skip_bad: bool = False) -> Dataset:
    """Read a pair TSV file (plain or gzip) into ``Dataset.pairs`` and its distinct ``questions``."""
    return read_line_file(path, skip_bad, _parse_line)


def _parse_line(dataset: Dataset, line: str) -> None:
    fields = line.split("\t")
    if len(fields) != 3:
        raise RecordError(
            f"expected 3 tab-separated fields (label, question1, question2), found {len(fields)}"
        )
    label = parse_label(fields[0])
    for index, text in enumerate(fields[1:], start=1):
        if not text.strip():
            raise RecordError(f"question{index} is empty")
    q1, q2 = add_questions(dataset, question_from_text(fields[1]), question_from_text(fields[2]))
    dataset.pairs.append(Pair(q1, q2, label))
