"""Medical Question Pairs CSV reader: quoting, header, errors, and the ../shared file when present."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest
from readers_fixtures import shared_file

from es_plugin_bridge.data.readers.mqp import read_mqp
from es_plugin_bridge.errors import DataFormatError


def test_quoted_commas_and_multiline_fields(tmp_path: Path) -> None:
    path = tmp_path / "mqp.csv"
    path.write_text(
        '1,"Can I drink alcohol, having taken azithromycin?",Is alcohol ok with antibiotics?,1\n'
        '1,"Can I drink alcohol, having taken azithromycin?","My knee hurts\nafter running, why?",0\n'
        "2,Is 192.9 lbs overweight at 39?,Am I overweight?,1\n",
        encoding="utf-8",
    )
    dataset = read_mqp(path)
    assert [pair.label for pair in dataset.pairs] == [1, 0, 1]
    assert dataset.pairs[0].q1.title == "Can I drink alcohol, having taken azithromycin?"
    assert dataset.pairs[0].q1 is dataset.pairs[1].q1
    assert dataset.pairs[1].q2.title == "My knee hurts\nafter running, why?"
    assert len(dataset.questions) == 5
    assert all(question.body == "" for question in dataset.questions.values())


def test_header_row_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "mqp.csv"
    path.write_text("dr_id,question_1,question_2,label\n1,a?,b?,0\n", encoding="utf-8")
    assert [pair.label for pair in read_mqp(path).pairs] == [0]


@pytest.mark.parametrize(
    ("row", "line", "problem"),
    [
        ("1,a?,b?", 2, "expected 4 comma-separated fields"),
        ("1,a?,b?,2", 2, "unknown label '2'"),
        ("1,a?,,1", 2, "question_2 is empty"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, row: str, line: int, problem: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(f'1,"multi\nline",b?,1\n{row}\n3,c?,d?,0\n', encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        read_mqp(path)
    assert caught.value.where == str(line + 1)  # the first row spans lines 1-2
    assert problem in caught.value.problem
    dataset = read_mqp(path, skip_bad=True)
    assert (len(dataset.pairs), dataset.skipped) == (2, 1)


def test_broken_quoting_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "quote.csv"
    path.write_text('1,a?,b?,1\n2,"unterminated,b?,1\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"quote.csv:2: malformed CSV"):
        read_mqp(path)


def test_shared_medical_pairs_when_present() -> None:
    path = shared_file("extra/medical-question-pairs.csv")
    with open(path, newline="", encoding="utf-8") as stream:
        rows = list(csv.reader(stream))
    dataset = read_mqp(path)
    assert len(dataset.pairs) == len(rows) == 3048
    assert [pair.label for pair in dataset.pairs] == [int(row[3]) for row in rows]
    assert [pair.q2.title for pair in dataset.pairs] == [row[2].strip() for row in rows]


def test_truncated_gzip_is_an_error(tmp_path: Path) -> None:
    rows = "".join(f"{i},Question {i} about dosage?,Another question {i}?,{i % 2}\n" for i in range(3000))
    path = tmp_path / "mqp.csv.gz"
    path.write_bytes(gzip.compress(rows.encode("utf-8"))[:3000])
    with pytest.raises(DataFormatError, match="cannot read compressed data"):
        read_mqp(path)
