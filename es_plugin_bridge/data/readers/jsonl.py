"""``jsonl``: one JSON object per line, each of one of three shapes (told apart by their keys).

A *question object* is ``{"id"?: str | int, "title": str, "body"?: str}``; where a question object
is expected, a plain string is accepted too and read like a ``pairs`` field (a title, optionally
followed by its HTML body). A question without ``id`` gets ``question_id(title, body)``.

- question: a question object on its own line → ``Dataset.questions``;
- pair: ``{"q1": question, "q2": question, "label": 1 | 0 | true | false | "duplicate" | "non-duplicate"}``
  → ``Dataset.pairs``;
- ranking query: ``{"query": question, "candidates": [question, ...], "labels": [int >= 0, ...],
  "scores"?: [number, ...], "split"?: str}`` → ``Dataset.queries`` (``scores`` are the first
  stage's, higher is better; ``labels`` graded relevance, relevant when > 0).

Every question met is also registered in ``Dataset.questions``; an id given to two different
questions is an error. Blank lines are passed over. The file may be gzip-compressed.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from es_plugin_bridge.data.questions import question_from_text, question_id
from es_plugin_bridge.data.readers._common import RecordError, add_questions, parse_label, read_line_file
from es_plugin_bridge.data.types import Dataset, Pair, Question, RankingQuery


def read_jsonl(path: Path, *, skip_bad: bool = False) -> Dataset:
    """Read a JSON Lines file of questions, pairs and ranking queries (shapes in the module doc)."""
    return read_line_file(path, skip_bad, _parse_line)


def _parse_line(dataset: Dataset, line: str) -> None:
    _parse_record(dataset, _load(line))


def _load(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise RecordError(f"invalid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(record, dict):
        raise RecordError(f"expected a JSON object, found {type(record).__name__}")
    lone = re.search(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}", line)
    if lone is not None and _has_lone_surrogate(record):
        raise RecordError(f"a lone surrogate {lone.group()} at column {lone.start() + 1} (not Unicode text)")
    return record


def _has_lone_surrogate(value: Any) -> bool:
    """Whether a string of ``value`` holds a lone surrogate (JSON allows the escape; no text encodes it)."""
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def _parse_record(dataset: Dataset, record: dict[str, Any]) -> None:
    if "query" in record:
        _ranking_query(dataset, record)
    elif "q1" in record or "q2" in record:
        first, second = _question(_field(record, "q1"), "q1"), _question(_field(record, "q2"), "q2")
        label = _label(_field(record, "label"))
        q1, q2 = add_questions(dataset, first, second)  # last: a bad record leaves nothing behind
        dataset.pairs.append(Pair(q1, q2, label))
    elif "title" in record:
        add_questions(dataset, _question(record, "question"))
    else:
        raise RecordError(
            "unknown record: expected a question (title), a pair (q1, q2, label) or a ranking query "
            f"(query, candidates, labels); found keys {sorted(record)}"
        )


def _ranking_query(dataset: Dataset, record: dict[str, Any]) -> None:
    query = _question(record["query"], "query")
    candidates_raw = _list(record, "candidates")
    if not candidates_raw:
        raise RecordError("'candidates' is empty")
    candidates = [_question(item, f"candidates[{index}]") for index, item in enumerate(candidates_raw)]
    labels = _list(record, "labels")
    if len(labels) != len(candidates):
        raise RecordError(f"{len(candidates)} candidates but {len(labels)} labels")
    for index, label in enumerate(labels):
        if isinstance(label, bool) or not isinstance(label, int) or label < 0:
            raise RecordError(f"labels[{index}] is {label!r}, not an integer >= 0")
    scores = None
    if record.get("scores") is not None:
        scores = _list(record, "scores")
        if len(scores) != len(candidates):
            raise RecordError(f"{len(candidates)} candidates but {len(scores)} scores")
        for index, score in enumerate(scores):
            if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
                raise RecordError(f"scores[{index}] is {score!r}, not a finite number")
        scores = [float(score) for score in scores]
    split = record.get("split", "")
    if not isinstance(split, str):
        raise RecordError(f"'split' is {split!r}, not a string")
    query, *candidates = add_questions(dataset, query, *candidates)
    dataset.queries.append(RankingQuery(query, candidates, list(labels), scores, split=split))


def _question(value: Any, name: str) -> Question:
    if isinstance(value, str):
        if not value.strip():
            raise RecordError(f"{name} is an empty string")
        return question_from_text(value)
    if not isinstance(value, dict):
        raise RecordError(f"{name} is {type(value).__name__}, expected a string or a question object")
    title, body = value.get("title"), value.get("body", "")
    if not isinstance(title, str):
        raise RecordError(f"{name}: 'title' is missing or not a string")
    if not isinstance(body, str):
        raise RecordError(f"{name}: 'body' is not a string")
    given_id = value.get("id")
    if given_id is None:
        return Question(question_id(title, body), title.strip(), body.strip())
    if isinstance(given_id, bool) or not isinstance(given_id, str | int) or str(given_id) == "":
        raise RecordError(f"{name}: 'id' is {given_id!r}, expected a non-empty string or an integer")
    return Question(str(given_id), title.strip(), body.strip())


def _field(record: dict[str, Any], name: str) -> Any:
    if name not in record:
        raise RecordError(f"missing field {name!r}")
    return record[name]


def _list(record: dict[str, Any], name: str) -> list[Any]:
    value = _field(record, name)
    if not isinstance(value, list):
        raise RecordError(f"{name!r} is {type(value).__name__}, expected a list")
    return value


def _label(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, str):
        return parse_label(value)
    raise RecordError(f"unknown label {value!r} (expected 1, 0, true, false, duplicate or non-duplicate)")
