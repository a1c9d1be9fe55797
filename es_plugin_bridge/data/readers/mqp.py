"""``mqp``: the Medical Question Pairs CSV, rows ``dr_id,question_1,question_2,label`` (label 1 | 0).

The release has no header; a first row that is exactly the header ``dr_id,question_1,question_2,label``
is accepted and passed over. Fields follow CSV quoting (questions hold commas). A question has no
body; ids are hashes of the text (``question_id``). ``dr_id`` (the writing doctor) is not kept.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from es_plugin_bridge.data.questions import question_id as _question_id
from es_plugin_bridge.data.readers._common import (
    COMPRESSION_ERRORS,
    BadRecords,
    RecordError,
    add_questions,
    open_binary,
)
from es_plugin_bridge.data.types import Dataset, Pair, Question
from es_plugin_bridge.errors import DataFormatError

_HEADER = ["dr_id", "question_1", "question_2", "label"]


def read_mqp(path: Path, *, skip_bad: bool = False) -> Dataset:
    """Read a Medical Question Pairs CSV file (plain or gzip) into ``Dataset.pairs`` and ``questions``."""
    path = Path(path)
    dataset = Dataset(name=path.name)
    bad = BadRecords(path, skip_bad)
    with open_binary(path) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text:
        rows = csv.reader(text, strict=True)
        start = 1  # the line where the current row starts (a quoted field may span lines)
        try:
            for row in rows:
                where, start = start, rows.line_num + 1
                if not row or (where == 1 and [field.strip().lower() for field in row] == _HEADER):
                    continue
                try:
                    dataset.pairs.append(_parse_row(dataset, row))
                except RecordError as error:
                    bad.report(where, str(error))
        except csv.Error as error:
            raise DataFormatError(str(path), str(start), f"malformed CSV ({error})") from None
        except UnicodeDecodeError as error:
            raise DataFormatError(
                str(path), f"after line {start - 1}", f"not UTF-8 text ({error.reason})"
            ) from None
        except COMPRESSION_ERRORS as error:
            where = f"after line {start - 1}"
            raise DataFormatError(str(path), where, f"cannot read compressed data ({error})") from None
    dataset.skipped = bad.skipped
    return dataset


def _parse_row(dataset: Dataset, row: list[str]) -> Pair:
    if len(row) != 4:
        raise RecordError(
            f"expected 4 comma-separated fields (dr_id, question_1, question_2, label), found {len(row)}"
        )
    label = row[3].strip()
    if label not in ("0", "1"):
        raise RecordError(f"unknown label {row[3]!r} (expected 1 or 0)")
    questions = []
    for index, text in enumerate(row[1:3], start=1):
        if not text.strip():
            raise RecordError(f"question_{index} is empty")
        questions.append(Question(_question_id(text), text.strip()))
    q1, q2 = add_questions(dataset, *questions)
    return Pair(q1, q2, int(label))
