"""Pair TSV reader on the shipped AskUbuntu samples and on broken files."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from readers_fixtures import TRAIN_TITLES, VAL, shared_file

from es_plugin_bridge.data.questions import question_id, split_title_body
from es_plugin_bridge.data.readers.pairs import read_pairs
from es_plugin_bridge.data.types import Dataset
from es_plugin_bridge.errors import DataFormatError


@pytest.fixture(scope="module")
def train_titles() -> Dataset:
    return read_pairs(TRAIN_TITLES)


def raw_fields(path: Path) -> list[list[str]]:
    return [line.rstrip("\n").split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


def test_train_titles_pairs_and_distinct_questions(train_titles: Dataset) -> None:
    dataset = train_titles
    rows = raw_fields(TRAIN_TITLES)
    assert len(dataset.pairs) == len(rows) == 24_000
    assert sum(pair.label for pair in dataset.pairs) == 12_000
    assert [pair.label for pair in dataset.pairs] == [int(row[0] == "duplicate") for row in rows]
    distinct = {text.strip() for row in rows for text in row[1:]}
    assert len(dataset.questions) == len(distinct)
    assert 35_000 < len(dataset.questions) < 37_500  # the data README: "about 36,000 distinct titles"
    for pair in dataset.pairs:
        assert dataset.questions[pair.q1.id] is pair.q1 and dataset.questions[pair.q2.id] is pair.q2


def test_equal_texts_share_one_question(train_titles: Dataset) -> None:
    dataset = train_titles
    by_title: dict[str, set[str]] = {}
    for pair in dataset.pairs:
        for question in (pair.q1, pair.q2):
            by_title.setdefault(question.title, set()).add(question.id)
    assert all(len(ids) == 1 for ids in by_title.values())
    assert len(by_title) == len(dataset.questions)  # titles only: one question per distinct title
    assert next(iter(by_title["How do I install Ubuntu?"])) == question_id("How do I install Ubuntu?")


def test_val_splits_title_from_html_body() -> None:
    dataset = read_pairs(VAL)
    assert len(dataset.pairs) == 1000 and sum(pair.label for pair in dataset.pairs) == 500
    first = dataset.pairs[0].q1
    assert first.title == "How do I install and mount an exFAT partition?"
    assert first.body.startswith("<p>I have searched around here") and first.body.endswith("</p>")
    for question in dataset.questions.values():
        assert question.title and question.body.startswith("<")
        assert "<p>" not in question.title


@pytest.mark.parametrize(
    ("text", "title", "body_start"),
    [
        # Real titles that hold '<': only a block-level tag starts the body.
        (
            "What does Package <package> has no installation candidate mean?<p>What does the above",
            "What does Package <package> has no installation candidate mean?",
            "<p>What",
        ),
        (
            "When installing Haskell, dependency is not satisfiable: ghc6 (< 6.12.1+)<p>What does that mean",
            "When installing Haskell, dependency is not satisfiable: ghc6 (< 6.12.1+)",
            "<p>What",
        ),
        (
            'Why does "Hi <user>" get stripped?<blockquote>  <p>Possible',
            'Why does "Hi <user>" get stripped?',
            "<blockquote>",
        ),
        ("Allow the <small> tag<p>Can the", "Allow the <small> tag", "<p>Can"),
        ("How to capture from HDMI with Ubuntu?", "How to capture from HDMI with Ubuntu?", ""),
    ],
)
def test_split_title_body_on_real_titles(text: str, title: str, body_start: str) -> None:
    got_title, got_body = split_title_body(text)
    assert got_title == title
    assert got_body.startswith(body_start) and bool(got_body) == bool(body_start)


def test_meta_stackexchange_and_quora_when_present() -> None:
    for name in ("extra/meta-stackexchange-val.tsv", "extra/quora-pairs-train.tsv"):
        path = shared_file(name)
        dataset = read_pairs(path)
        rows = raw_fields(path)
        assert len(dataset.pairs) == len(rows)
        assert sum(pair.label for pair in dataset.pairs) == sum(row[0] == "duplicate" for row in rows)


def test_numeric_labels_blank_lines_crlf_and_gzip(tmp_path: Path) -> None:
    text = "1\tHow do I boot?\tBooting how?\r\n\n0\tWifi drops\tSound is off<p>Since 12.04</p>\r\n"
    plain = tmp_path / "pairs.tsv"
    plain.write_bytes(text.encode("utf-8"))
    packed = tmp_path / "pairs.tsv.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    for path in (plain, packed):
        dataset = read_pairs(path)
        assert [pair.label for pair in dataset.pairs] == [1, 0]
        assert (
            dataset.pairs[1].q2.title == "Sound is off" and dataset.pairs[1].q2.body == "<p>Since 12.04</p>"
        )


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("duplicate\tonly one question", "expected 3 tab-separated fields"),
        ("duplicate\ta\tb\tc", "found 4"),
        ("dup\ta\tb", "unknown label 'dup'"),
        ("duplicate\t \tb", "question1 is empty"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text(f"duplicate\ta\tb\n{line}\nnon-duplicate\tc\td\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        read_pairs(path)
    assert str(caught.value).startswith(f"{path}:2: ")
    assert problem in str(caught.value)
    dataset = read_pairs(path, skip_bad=True)
    assert (len(dataset.pairs), dataset.skipped) == (2, 1)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.tsv"
    path.write_bytes("duplicate\ta\tb\nduplicate\tcaf\xe9\tb\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"latin1.tsv:2: not UTF-8"):
        read_pairs(path)


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_gzip_is_an_error(tmp_path: Path, damage: str) -> None:
    packed = gzip.compress(VAL.read_bytes())
    if damage == "truncated":
        packed = packed[: len(packed) // 2]
    else:
        packed = packed[:5000] + bytes(200) + packed[5200:]
    path = tmp_path / "val.tsv.gz"
    path.write_bytes(packed)
    with pytest.raises(DataFormatError, match=r"val.tsv.gz:after line \d+: cannot read compressed data"):
        read_pairs(path, skip_bad=True)
