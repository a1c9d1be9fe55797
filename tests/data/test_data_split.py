"""``esrerank split``: no question crosses splits, pairs across splits are dropped and counted,
held-out duplicate sizes hold, and the same seed gives the same files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.split import split_by_question
from es_plugin_bridge.data.types import Pair, Question

TITLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge/samples/askubuntu-pairs/train_titles.tsv"


@pytest.fixture(scope="module")
def pairs() -> list[Pair]:
    return read_spec(f"pairs:{TITLES}").pairs


def _question_splits(parts: dict[str, list[Pair]]) -> dict[str, set[str]]:
    return {name: {q.id for p in group for q in (p.q1, p.q2)} for name, group in parts.items()}


def _assert_no_question_crosses(parts: dict[str, list[Pair]]) -> None:
    seen = _question_splits(parts)
    names = list(seen)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not seen[a] & seen[b], f"{len(seen[a] & seen[b])} questions in both {a} and {b}"


@pytest.mark.parametrize(("dev", "test"), [(1000, 2000), (500, 1000)])
def test_no_question_crosses_splits_and_held_out_sizes_hold(pairs, dev, test):
    result = split_by_question(pairs, {"dev": dev, "test": test}, seed=1)
    assert list(result.parts) == ["dev", "test", "train"]
    _assert_no_question_crosses(result.parts)
    assert sum(1 for p in result.parts["dev"] if p.label > 0) >= dev
    assert sum(1 for p in result.parts["test"] if p.label > 0) >= test
    kept = [p for group in result.parts.values() for p in group]
    assert len(kept) + len(result.dropped) == len(pairs)
    assert sorted(map(id, kept + result.dropped)) == sorted(map(id, pairs))
    # Only non-duplicates are dropped, and each has its two questions in two different splits.
    assert result.dropped and all(p.label == 0 for p in result.dropped)
    assert sum(1 for p in kept if p.label > 0) == sum(1 for p in pairs if p.label > 0)
    where = {q: name for name, ids in _question_splits(result.parts).items() for q in ids}
    both_kept = [p for p in result.dropped if p.q1.id in where and p.q2.id in where]
    assert both_kept and all(where[p.q1.id] != where[p.q2.id] for p in both_kept)


def test_assignment_depends_on_the_seed_not_on_pair_order(pairs):
    sizes = {"dev": 500, "test": 1000}
    first = split_by_question(pairs, sizes, seed=1)
    reversed_ = split_by_question(pairs[::-1], sizes, seed=1)
    assert _question_splits(first.parts) == _question_splits(reversed_.parts)
    assert len(first.dropped) == len(reversed_.dropped)
    other = split_by_question(pairs, sizes, seed=2)
    assert _question_splits(other.parts)["test"] != _question_splits(first.parts)["test"]


def test_a_non_duplicate_linking_two_splits_is_dropped():
    q = {name: Question(name, name) for name in "abcdefgh"}
    pairs = [Pair(q["a"], q["b"], 1), Pair(q["c"], q["d"], 1), Pair(q["e"], q["f"], 1),
             Pair(q["g"], q["h"], 1), Pair(q["a"], q["c"], 0), Pair(q["b"], q["h"], 0)]
    result = split_by_question(pairs, {"dev": 1, "test": 1}, seed=3)
    _assert_no_question_crosses(result.parts)
    # Four components of one duplicate pair each: dev and test get one each, train the other two.
    assert [sum(p.label for p in result.parts[n]) for n in ("dev", "test", "train")] == [1, 1, 2]
    comp = {"a": 0, "b": 0, "c": 1, "d": 1, "e": 2, "f": 2, "g": 3, "h": 3}
    split_of = {comp[p.q1.id]: name for name, group in result.parts.items() for p in group if p.label}
    for p in pairs:
        if p.label == 0:
            same = split_of[comp[p.q1.id]] == split_of[comp[p.q2.id]]
            assert (p in result.dropped) is not same


def test_split_command_reports_drops_is_deterministic_and_round_trips(tmp_path, cli, pairs):
    outputs = []
    for out in ("a", "b"):
        code, printed, err = cli(["split", f"pairs:{TITLES}", "--out-dir", str(tmp_path / out),
                                  "--dev", "500", "--test", "500"])
        assert code == 0, err
        outputs.append(printed)
    for name in ("train", "dev", "test"):
        assert (tmp_path / "a" / f"{name}.tsv").read_bytes() == (tmp_path / "b" / f"{name}.tsv").read_bytes()
    parts = {n: read_spec(f"pairs:{tmp_path / 'a' / n}.tsv").pairs for n in ("train", "dev", "test")}
    _assert_no_question_crosses(parts)
    assert sum(1 for p in parts["dev"] if p.label > 0) >= 500
    assert sum(1 for p in parts["test"] if p.label > 0) >= 500
    match = re.search(r"dropped: (\d+) of (\d+) pairs", outputs[0])
    assert match, outputs[0]
    dropped, total = int(match[1]), int(match[2])
    assert total == len(pairs)
    assert dropped > 0
    assert sum(map(len, parts.values())) + dropped == total
