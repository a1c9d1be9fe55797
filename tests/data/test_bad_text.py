"""Invalid UTF-8 and lone surrogates: one line naming where, and ``--skip-bad`` skips just that line
(issue 34, item 8). Before, a query holding either was a Python traceback (``str.encode`` in the
question id's hash), and one bad byte in a JSONL spec refused the whole file even with ``--skip-bad``.
The records are real AskUbuntu duplicate pairs (the shipped ``val.tsv`` titles)."""

from __future__ import annotations

import json

import pytest
from pasted_log import VAL

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import DataFormatError
from es_plugin_bridge.evaluation.task_run import SpecReader

#: What Python makes of the byte 0xFF in argv (the surrogateescape handler).
BAD_BYTE = "\udcff"


def one_line(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out, err)
    return err


@pytest.mark.parametrize("command", [
    ["search", "--corpus", f"pairs:{VAL}"],
    ["es", "search", "--mode", "bridge", "--index", "q", "--es-url", "http://127.0.0.1:9"],
])
def test_a_query_with_an_invalid_byte_is_one_line(cli, command):
    err = one_line(*cli([*command, "--", f"exfat {BAD_BYTE} mount"]))
    assert "the query is not valid UTF-8: byte 0xFF at character 7" in err


def test_a_query_with_a_lone_surrogate_is_one_line(cli):
    err = one_line(*cli(["search", "--corpus", f"pairs:{VAL}", "--", "terminal \ud83d emoji"]))
    assert "lone surrogate U+D83D at character 10" in err


@pytest.fixture
def spec_with_bad_lines(tmp_path):
    """Six AskUbuntu pairs as JSONL; line 2 holds the byte 0xFF, line 4 a lone surrogate escape."""
    rows = [line.split("\t") for line in VAL.read_text(encoding="utf-8").splitlines()[:6]]
    lines = [json.dumps({"q1": r[1].split("<p>")[0], "q2": r[2].split("<p>")[0],
                         "label": int(r[0] == "duplicate")}).encode() for r in rows]
    lines[1] = lines[1].replace(b'"q1": "', b'"q1": "\xff', 1)
    lines[3] = lines[3].replace(b'"q2": "', b'"q2": "\\ud83d ', 1)
    path = tmp_path / "pairs.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return f"jsonl:{path}"


def test_a_bad_byte_without_skip_bad_names_its_line_and_byte(spec_with_bad_lines):
    expected = r"pairs.jsonl:2: not UTF-8 text \(invalid start byte at byte 9 "
    with pytest.raises(DataFormatError, match=expected):
        read_spec(spec_with_bad_lines)


def test_a_lone_surrogate_names_its_line_and_column(spec_with_bad_lines, tmp_path):
    path = tmp_path / "pairs.jsonl"
    good = [line for n, line in enumerate(path.read_bytes().splitlines(), 1) if n != 2]
    path.write_bytes(b"\n".join(good) + b"\n")
    with pytest.raises(DataFormatError, match=r"pairs.jsonl:3: a lone surrogate \\ud83d at column"):
        read_spec(spec_with_bad_lines)


def test_skip_bad_skips_only_the_bad_lines_with_a_note(spec_with_bad_lines):
    reader = SpecReader(skip_bad=True)
    dataset = reader(spec_with_bad_lines)
    assert len(dataset.pairs) == 4 and dataset.skipped == 2
    assert reader.notes == [f"{spec_with_bad_lines}: skipped 2 malformed records (--skip-bad)"]
