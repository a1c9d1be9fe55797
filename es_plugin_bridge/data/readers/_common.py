"""Helpers every reader shares: opening plain or gzip files, question ids, bad-record policy."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from es_plugin_bridge.data.types import Dataset, Question
from es_plugin_bridge.errors import DataFormatError, UserError

_GZIP_MAGIC = b"\x1f\x8b"

# What reading a truncated or corrupt gzip stream raises.
COMPRESSION_ERRORS = (OSError, EOFError, zlib.error)

def open_binary(path: Path) -> BinaryIO:
    """Open ``path`` for reading, decompressing it when it is gzip (detected by content, not name)."""
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == _GZIP_MAGIC:
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def iter_lines(path: Path, bad: BadRecords | None = None) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its end-of-line) of a UTF-8 text file, plain or gzip.

    Lines end at '\\n' only, so a stray '\\r' inside a field cannot split a record in two. A line that
    is not UTF-8 is reported to ``bad`` (so ``--skip-bad`` skips it alone, counted) or, without one,
    stops the read; either way naming its line and byte.
    """
    number = 0
    with open_binary(path) as stream:
        try:
            for number, raw in enumerate(stream, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    problem = f"not UTF-8 text ({error.reason} at byte {error.start + 1} of the line)"
                    if bad is None:
                        raise DataFormatError(str(path), str(number), problem) from None
                    bad.report(number, problem)
                    continue
                if number == 1:
                    line = line.removeprefix("\ufeff")
                yield number, line.rstrip("\n").removesuffix("\r")
        except COMPRESSION_ERRORS as error:
            where = f"after line {number}"
            raise DataFormatError(str(path), where, f"cannot read compressed data ({error})") from None


def find_data_file(directory: Path, name: str) -> Path | None:
    """``directory/name`` or ``directory/name.gz``, whichever exists (the plain file first), or None."""
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def require_data_file(directory: Path, name: str) -> Path:
    """Like find_data_file, but a missing file is a UserError naming it."""
    path = find_data_file(directory, name)
    if path is None:
        raise UserError(f"{directory}: no {name} (nor {name}.gz) in this directory")
    return path


class RecordError(Exception):
    """One record breaks its format; the reader's loop adds the file and line and applies the policy."""


class BadRecords:
    """The policy for malformed records: stop with a DataFormatError, or (skip_bad) count and go on."""

    def __init__(self, path: Path, skip_bad: bool) -> None:
        self.path = path
        self.skip_bad = skip_bad
        self.skipped = 0

    def report(self, where: str | int, problem: str) -> None:
        """Raise for this record, or count it as skipped when the user asked to skip bad records."""
        if not self.skip_bad:
            raise DataFormatError(str(self.path), str(where), problem)
        self.skipped += 1


def read_line_records(
    path: Path, dataset: Dataset, skip_bad: bool, parse: Callable[[Dataset, str], None]
) -> int:
    """Apply ``parse(dataset, line)`` to each non-blank line, under the bad-record policy.

    ``parse`` raises RecordError for a malformed line; returns how many lines were skipped.
    """
    bad = BadRecords(path, skip_bad)
    for number, line in iter_lines(path, bad):
        if not line.strip():
            continue
        try:
            parse(dataset, line)
        except RecordError as error:
            bad.report(number, str(error))
    return bad.skipped


def read_line_file(path: Path, skip_bad: bool, parse: Callable[[Dataset, str], None]) -> Dataset:
    """A Dataset named after ``path``, filled by ``parse`` line by line (see read_line_records)."""
    path = Path(path)
    dataset = Dataset(name=path.name)
    dataset.skipped = read_line_records(path, dataset, skip_bad, parse)
    return dataset


def add_questions(dataset: Dataset, *questions: Question) -> list[Question]:
    """Register one record's questions in ``dataset.questions``, all or none.

    An id that names two different questions raises RecordError (so the caller can name the
    record). Returns the registered instances, so equal questions share one object.
    """
    for question in questions:
        known = dataset.questions.get(question.id)
        if known is not None and known != question:
            raise RecordError(f"question id {question.id!r} already names a different question")
    return [dataset.questions.setdefault(question.id, question) for question in questions]


def parse_label(text: str) -> int:
    """A duplicate label: 'duplicate' | 'non-duplicate' | '1' | '0' (case and spaces ignored)."""
    value = text.strip().lower()
    if value in ("duplicate", "1"):
        return 1
    if value in ("non-duplicate", "0"):
        return 0
    raise RecordError(f"unknown label {text!r} (expected duplicate, non-duplicate, 1 or 0)")
