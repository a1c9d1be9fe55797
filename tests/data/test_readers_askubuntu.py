"""Lei et al. (2016) AskUbuntu release reader on fixtures written in the release's exact layout."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from readers_fixtures import AskUbuntuRelease, write_askubuntu_release

from es_plugin_bridge.data.readers.askubuntu import read_askubuntu
from es_plugin_bridge.errors import DataFormatError, UserError


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_release_is_read_completely(tmp_path: Path, gz: bool) -> None:
    release = write_askubuntu_release(tmp_path / "askubuntu", gz=gz)
    if gz:
        assert not (tmp_path / "askubuntu" / "text_tokenized.txt").exists()
    dataset = read_askubuntu(tmp_path / "askubuntu")

    assert {qid: (q.title, q.body) for qid, q in dataset.questions.items()} == release.corpus
    check_pairs(dataset.pairs, release)
    for split in ("dev", "test"):
        queries = [query for query in dataset.queries if query.split == split]
        assert len(queries) == len(release.ranking[split])
        for query, (qid, similar, candidates, scores) in zip(queries, release.ranking[split], strict=True):
            assert query.query is dataset.questions[qid]
            assert [candidate.id for candidate in query.candidates] == candidates
            assert query.labels == [int(candidate in similar) for candidate in candidates]
            assert query.first_stage_scores == scores
            assert sum(query.labels) == len(similar)


def check_pairs(pairs: list, release: AskUbuntuRelease) -> None:
    expected = []
    for qid, similar, randoms in release.train:
        expected += [(qid, s, 1) for s in similar]
        expected += [(qid, r, 0) for r in randoms if r not in similar]
    assert [(p.q1.id, p.q2.id, p.label) for p in pairs] == expected
    # train line 1 lists a similar id among its random ids: it stays a positive only.
    first_query = release.train[0][0]
    assert sum(1 for p in pairs if p.q1.id == first_query and p.label == 0) == 7


def test_only_the_corpus_is_required(tmp_path: Path) -> None:
    directory = tmp_path / "askubuntu"
    release = write_askubuntu_release(directory)
    for name in ("train_random.txt", "dev.txt", "test.txt"):
        (directory / name).unlink()
    dataset = read_askubuntu(directory)
    assert len(dataset.questions) == len(release.corpus) and not dataset.pairs and not dataset.queries
    (directory / "text_tokenized.txt").unlink()
    with pytest.raises(UserError, match="no text_tokenized.txt"):
        read_askubuntu(directory)


def replace_line(path: Path, number: int, new: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[number - 1] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_score_count_must_match_candidate_count(tmp_path: Path) -> None:
    directory = tmp_path / "askubuntu"
    release = write_askubuntu_release(directory)
    qid, similar, candidates, scores = release.ranking["dev"][2]
    replace_line(
        directory / "dev.txt",
        3,
        f"{qid}\t{' '.join(similar)}\t{' '.join(candidates)}\t{' '.join(map(str, scores[:19]))}",
    )
    with pytest.raises(DataFormatError) as caught:
        read_askubuntu(directory)
    assert str(caught.value) == f"{directory / 'dev.txt'}:3: 20 candidate ids but 19 BM25 scores"
    dataset = read_askubuntu(directory, skip_bad=True)
    assert dataset.skipped == 1
    assert len([q for q in dataset.queries if q.split == "dev"]) == len(release.ranking["dev"]) - 1


@pytest.mark.parametrize(
    ("name", "line", "make", "problem"),
    [
        (
            "train_random.txt",
            4,
            lambda r: f"{r.train[3][0]}\t99999\t{' '.join(r.train[3][2])}",
            "'99999' is not in",
        ),
        ("test.txt", 1, lambda r: "77777\t\t1000\t3.5", "'77777' is not in"),
        ("test.txt", 2, lambda r: f"{r.ranking['test'][1][0]}\t\t1000 1037\t3.5 x", "not a number"),
        ("dev.txt", 5, lambda r: f"{r.ranking['dev'][4][0]}\t1000\t1000", "found 3 tab-separated fields"),
        ("text_tokenized.txt", 7, lambda r: "just-an-id", "found 1 tab-separated fields"),
        ("text_tokenized.txt", 8, lambda r: "1000\tanother title\tbody", "'1000' appears twice"),
    ],
)
def test_bad_lines_name_file_and_line(
    tmp_path: Path, name: str, line: int, make: Callable[[AskUbuntuRelease], str], problem: str
) -> None:
    directory = tmp_path / "askubuntu"
    release = write_askubuntu_release(directory)
    replace_line(directory / name, line, make(release))
    with pytest.raises(DataFormatError) as caught:
        read_askubuntu(directory)
    assert caught.value.path == str(directory / name) and caught.value.where == str(line)
    assert problem in caught.value.problem
    assert read_askubuntu(directory, skip_bad=True).skipped >= 1
