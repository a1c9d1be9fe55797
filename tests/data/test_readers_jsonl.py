"""JSON Lines reader: the three record shapes, shared question ids, and every kind of bad line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from es_plugin_bridge.data.questions import question_from_text, question_id
from es_plugin_bridge.data.readers.jsonl import read_jsonl
from es_plugin_bridge.errors import DataFormatError


def write_jsonl(path: Path, *records: object) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8"
    )
    return path


def test_the_three_shapes(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "data.jsonl",
        {"id": "q1", "title": "Boot fails", "body": "<p>after upgrade</p>"},
        {
            "q1": {"id": "q1", "title": "Boot fails", "body": "<p>after upgrade</p>"},
            "q2": "Grub error<p>x</p>",
            "label": 1,
        },
        {"q1": {"title": "Wifi"}, "q2": {"id": 7, "title": "Sound"}, "label": "non-duplicate"},
        "",
        {
            "query": "How to mount?",
            "candidates": [{"id": "q1", "title": "Boot fails", "body": "<p>after upgrade</p>"}, "Mount usb"],
            "labels": [0, 2],
            "scores": [3.5, 1],
            "split": "dev",
        },
        {"query": {"title": "Printer"}, "candidates": ["Printer driver"], "labels": [1]},
    )
    dataset = read_jsonl(path)
    boot = dataset.questions["q1"]
    assert (boot.title, boot.body) == ("Boot fails", "<p>after upgrade</p>")
    first, second = dataset.pairs
    assert first.q1 is boot and first.label == 1 and first.q2 == question_from_text("Grub error<p>x</p>")
    assert second.q1.id == question_id("Wifi") and second.q2.id == "7" and second.label == 0
    ranked, plain = dataset.queries
    assert ranked.candidates[0] is boot and ranked.candidates[1].title == "Mount usb"
    assert (ranked.labels, ranked.first_stage_scores, ranked.split) == ([0, 2], [3.5, 1.0], "dev")
    assert (plain.first_stage_scores, plain.split) == (None, "")
    all_questions = {
        boot,
        first.q2,
        second.q1,
        second.q2,
        ranked.query,
        *ranked.candidates,
        plain.query,
        *plain.candidates,
    }
    assert set(dataset.questions.values()) == all_questions


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"title": "a"', "invalid JSON"),
        ('["title", "a"]', "expected a JSON object, found list"),
        ('{"name": "a"}', "unknown record"),
        ('{"q1": "a", "label": 1}', "missing field 'q2'"),
        ('{"q1": "a", "q2": "b"}', "missing field 'label'"),
        ('{"q1": "a", "q2": "b", "label": 3}', "unknown label 3"),
        ('{"q1": "a", "q2": {"body": "b"}, "label": 0}', "q2: 'title' is missing"),
        ('{"q1": "", "q2": "b", "label": 0}', "q1 is an empty string"),
        ('{"query": "a", "candidates": ["b", "c"], "labels": [1]}', "2 candidates but 1 labels"),
        ('{"query": "a", "candidates": ["b"], "labels": [-1]}', "labels[0] is -1"),
        ('{"query": "a", "candidates": ["b"], "labels": [1], "scores": ["x"]}', "scores[0] is 'x'"),
        ('{"query": "a", "candidates": [], "labels": []}', "'candidates' is empty"),
        ('{"query": "a", "labels": []}', "missing field 'candidates'"),
        ('{"id": "q1", "title": "something else"}', "'q1' already names a different question"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path: Path, line: str, problem: str) -> None:
    path = write_jsonl(
        tmp_path / "bad.jsonl", {"id": "q1", "title": "first"}, line, {"q1": "x", "q2": "y", "label": 0}
    )
    with pytest.raises(DataFormatError) as caught:
        read_jsonl(path)
    assert str(caught.value).startswith(f"{path}:2: ")
    assert problem in caught.value.problem
    dataset = read_jsonl(path, skip_bad=True)
    assert (dataset.skipped, len(dataset.pairs), dataset.questions["q1"].title) == (1, 1, "first")
    assert len(dataset.questions) == 3  # nothing of the skipped record was kept
