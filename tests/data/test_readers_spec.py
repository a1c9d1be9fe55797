"""FORMAT:PATH specs: each format reaches its reader; every mistake is a one-line UserError."""

from __future__ import annotations

from pathlib import Path

import pytest
from readers_fixtures import SEMEVAL_DEV, TRAIN_TITLES, write_askubuntu_release

from es_plugin_bridge.data.readers import FORMATS
from es_plugin_bridge.data.spec import parse_spec, read_spec
from es_plugin_bridge.errors import DataFormatError, UserError

ALL_FORMATS = ("semeval", "pairs", "mqp", "askubuntu", "stackexchange", "jsonl")


def test_every_contract_format_has_a_reader() -> None:
    assert tuple(FORMATS) == ALL_FORMATS


def test_parse_spec_returns_format_and_path() -> None:
    assert parse_spec(f"semeval:{SEMEVAL_DEV}") == ("semeval", SEMEVAL_DEV)
    assert parse_spec(f"PAIRS:{TRAIN_TITLES}") == ("pairs", TRAIN_TITLES)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        (f"semevel:{SEMEVAL_DEV}", "unknown format 'semevel'"),
        (str(SEMEVAL_DEV), "is not FORMAT:PATH"),
        ("pairs:", "no path after 'pairs:'"),
        ("pairs:/no/such/file.tsv", "/no/such/file.tsv does not exist"),
        (f"askubuntu:{TRAIN_TITLES}", "is not a directory"),
        (f"semeval:{SEMEVAL_DEV.parent}", "is not a file"),
    ],
)
def test_bad_specs_name_the_problem_and_the_valid_formats(spec: str, problem: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_spec(spec)
    message = str(caught.value)
    assert problem in message
    assert "\n" not in message
    assert "valid formats: semeval, pairs, mqp, askubuntu, stackexchange, jsonl" in message


def test_read_spec_dispatches_on_the_format(tmp_path: Path) -> None:
    semeval = read_spec(f"semeval:{SEMEVAL_DEV}")
    assert semeval.queries and not semeval.pairs
    pairs = read_spec(f"pairs:{TRAIN_TITLES}")
    assert pairs.pairs and not pairs.queries
    write_askubuntu_release(tmp_path / "release")
    askubuntu = read_spec(f"askubuntu:{tmp_path / 'release'}")
    assert askubuntu.pairs and askubuntu.queries


def test_read_spec_passes_skip_bad_on(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("duplicate\ta\tb\nmaybe\tc\td\nnon-duplicate\te\tf\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"pairs.tsv:2: unknown label 'maybe'"):
        read_spec(f"pairs:{path}")
    dataset = read_spec(f"pairs:{path}", skip_bad=True)
    assert (len(dataset.pairs), dataset.skipped) == (2, 1)
