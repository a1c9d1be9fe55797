"""SemEval-2016 Task 3 reader on the shipped dev file, the ../shared files and broken variants."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

import pytest
from readers_fixtures import SEMEVAL_DEV, shared_file

from es_plugin_bridge.data.readers.semeval import read_semeval
from es_plugin_bridge.data.types import Dataset, RankingQuery
from es_plugin_bridge.errors import DataFormatError


@pytest.fixture(scope="module")
def dev() -> Dataset:
    return read_semeval(SEMEVAL_DEV)


def label_counts(dataset: Dataset) -> tuple[int, int, int]:
    counts = Counter(label for query in dataset.queries for label in query.labels)
    return counts[2], counts[1], counts[0]


def average_precision(query: RankingQuery) -> float:
    """AP of the given order with SemEval's convention (no relevant candidate → 0)."""
    hits, total = 0, 0.0
    for rank, label in enumerate(query.labels, start=1):
        if label > 0:
            hits += 1
            total += hits / rank
    return total / hits if hits else 0.0


def test_dev_counts_match_the_data_readme(dev: Dataset) -> None:
    assert len(dev.queries) == 50
    assert sum(len(query.candidates) for query in dev.queries) == 500
    assert label_counts(dev) == (59, 155, 286)
    assert all(len(query.candidates) == len(query.labels) == 10 for query in dev.queries)


def test_candidates_follow_the_engine_rank(dev: Dataset) -> None:
    for query in dev.queries:
        scores = query.first_stage_scores
        assert scores is not None and len(scores) == len(query.candidates)
        assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    # The engine's own order is what the task organisers report: MAP 71.35 on this file.
    mean_ap = 100 * sum(map(average_precision, dev.queries)) / len(dev.queries)
    assert round(mean_ap, 2) == 71.35


def test_first_query_of_the_file_is_read_field_by_field(dev: Dataset) -> None:
    # <OrgQuestion ORGQ_ID="Q268"> Good Bank ... its first thread is Q268_R4 at rank 4, PerfectMatch.
    query = next(query for query in dev.queries if query.query.id == "Q268")
    assert query.query.title == "Good Bank"
    assert query.query.body == "Which is a good bank as per your experience in Doha"
    first = query.candidates[0]
    assert (first.id, first.title, query.labels[0], query.first_stage_scores[0]) == (
        "Q268_R4",
        "Best Bank",
        2,
        -4.0,
    )
    assert first.body.startswith("Hi Guys; I need to open a new bank accoount.")


def test_questions_and_comments_are_all_kept(dev: Dataset) -> None:
    text = SEMEVAL_DEV.read_text(encoding="utf-8")
    related_ids = set(re.findall(r'RELQ_ID="([^"]+)"', text))
    org_ids = set(re.findall(r'ORGQ_ID="([^"]+)"', text))
    assert set(dev.questions) == related_ids | org_ids
    assert len(dev.unlabelled) == len(re.findall(r"<RelCText>(?!</RelCText>)", text))
    assert "Commercial bank/IBQ" in dev.unlabelled


@pytest.mark.parametrize(
    ("name", "queries", "related", "labels"),
    [
        ("SemEval2016-Task3-CQA-QL-train-part1-v1.1.xml", 103, 613, (90, 206, 317)),
        ("SemEval2016-Task3-CQA-QL-train-part2.xml", 67, 670, (54, 242, 374)),
        ("SemEval2016-Task3-CQA-QL-dev.xml", 50, 500, (59, 155, 286)),
    ],
)
def test_shared_files_match_the_data_readme(name: str, queries: int, related: int, labels: tuple) -> None:
    dataset = read_semeval(shared_file(f"semeval2016-task3/{name}"))
    assert len(dataset.queries) == queries
    assert sum(len(query.candidates) for query in dataset.queries) == related
    assert label_counts(dataset) == labels
    assert len({query.query.id for query in dataset.queries}) == queries


ORG = (
    '<OrgQuestion ORGQ_ID="{oid}"><OrgQSubject>Visa</OrgQSubject><OrgQBody>How long?</OrgQBody>'
    "{threads}</OrgQuestion>"
)
THREAD = (
    '<Thread THREAD_SEQUENCE="{rid}"><RelQuestion RELQ_ID="{rid}" RELQ_RANKING_ORDER="{rank}" '
    'RELQ_RELEVANCE2ORGQ="{label}"><RelQSubject>s {rid}</RelQSubject>'
    "<RelQBody>b {rid}</RelQBody></RelQuestion>"
    '<RelComment RELC_ID="{rid}_C1"><RelCText>comment on {rid}</RelCText></RelComment></Thread>'
)


def write_semeval(path: Path, *org_questions: str) -> Path:
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<xml version="1.0">\n'
        + "\n".join(org_questions)
        + "\n</xml>\n"
    )
    return path


def org(oid: str, *threads: tuple[str, int, str]) -> str:
    return ORG.format(
        oid=oid, threads="".join(THREAD.format(rid=r, rank=k, label=lab) for r, k, lab in threads)
    )


def test_an_org_question_repeated_per_thread_is_one_query(tmp_path: Path) -> None:
    path = write_semeval(
        tmp_path / "repeat.xml",
        org("Q1", ("Q1_R9", 9, "Irrelevant")),
        org("Q2", ("Q2_R1", 1, "Relevant")),
        org("Q1", ("Q1_R2", 2, "PerfectMatch")),
    )
    dataset = read_semeval(path)
    assert [query.query.id for query in dataset.queries] == ["Q1", "Q2"]
    q1 = dataset.queries[0]
    assert [candidate.id for candidate in q1.candidates] == ["Q1_R2", "Q1_R9"]
    assert (q1.labels, q1.first_stage_scores) == ([2, 0], [-2.0, -9.0])
    assert sorted(dataset.unlabelled) == ["comment on Q1_R2", "comment on Q1_R9", "comment on Q2_R1"]


def test_gzip_file_reads_the_same(tmp_path: Path, dev: Dataset) -> None:
    packed = tmp_path / "dev.xml.gz"
    packed.write_bytes(gzip.compress(SEMEVAL_DEV.read_bytes()))
    assert read_semeval(packed).queries == dev.queries


def test_malformed_xml_names_file_and_line(tmp_path: Path) -> None:
    lines = SEMEVAL_DEV.read_text(encoding="utf-8").splitlines(keepends=True)
    broken_at = next(i for i, line in enumerate(lines) if "<RelQBody>" in line and i > 200)
    lines[broken_at] = lines[broken_at].replace("</RelQBody>", "</RelQBdy>")
    path = tmp_path / "broken.xml"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        read_semeval(path, skip_bad=True)  # broken XML cannot be skipped
    assert caught.value.path == str(path)
    assert caught.value.where.startswith(f"{broken_at + 1}:")
    assert "malformed XML" in str(caught.value)


def test_truncated_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.xml"
    path.write_bytes(SEMEVAL_DEV.read_bytes()[:100_000])
    with pytest.raises(DataFormatError, match="malformed XML"):
        read_semeval(path)


def test_unknown_label_stops_or_is_skipped(tmp_path: Path) -> None:
    path = write_semeval(
        tmp_path / "label.xml",
        org("Q1", ("Q1_R1", 1, "Relevant"), ("Q1_R2", 2, "Good")),
        org("Q2", ("Q2_R1", 1, "Irrelevant")),
    )
    with pytest.raises(DataFormatError) as caught:
        read_semeval(path)
    assert caught.value.where == "3"
    assert "RELQ_ID='Q1_R2'" in caught.value.problem and "'Good'" in caught.value.problem
    dataset = read_semeval(path, skip_bad=True)
    assert dataset.skipped == 1
    assert [[c.id for c in q.candidates] for q in dataset.queries] == [["Q1_R1"], ["Q2_R1"]]


@pytest.mark.parametrize(
    ("xml", "problem"),
    [
        (org("Q1", ("Q1_R1", 1, "Relevant")).replace('ORGQ_ID="Q1"', ""), "no ORGQ_ID"),
        (
            org("Q1", ("Q1_R1", 1, "Relevant")).replace('RELQ_RANKING_ORDER="1"', 'RELQ_RANKING_ORDER="one"'),
            "'one'",
        ),
        (
            org("Q1", ("Q1_R1", 1, "Relevant")).replace("<RelQSubject>s Q1_R1</RelQSubject>", ""),
            "no <RelQSubject>",
        ),
        (org("Q1", ("Q1_R1", 1, "Relevant"), ("Q1_R1", 2, "Relevant")), "repeats"),
    ],
)
def test_broken_elements_are_named(tmp_path: Path, xml: str, problem: str) -> None:
    with pytest.raises(DataFormatError, match=problem):
        read_semeval(write_semeval(tmp_path / "bad.xml", xml))


def test_xml_without_org_questions_is_not_semeval(tmp_path: Path) -> None:
    path = tmp_path / "posts.xml"
    path.write_text('<posts><row Id="1" PostTypeId="1"/></posts>')
    with pytest.raises(DataFormatError, match="no <OrgQuestion> element"):
        read_semeval(path)


ORG_TEXT = re.compile(r'<OrgQuestion ORGQ_ID="([^"]+)">(\s*<OrgQSubject>)(.*?)'
                      r"(</OrgQSubject>\s*<OrgQBody>)(.*?)(</OrgQBody>)", re.DOTALL)


def dev_with_stray_quotes(path: Path, changed: dict[str, set[int]]) -> Path:
    """The shipped dev file with a stray '"' in the subject and body of some repeats of an original
    question, as in the official 2016 test file. ``changed``: ORGQ_ID → which of its repeats (0-based)."""
    seen: Counter[str] = Counter()

    def edit(match: re.Match[str]) -> str:
        org_id, open_subject, subject, between, body, close = match.groups()
        nth = seen[org_id]
        seen[org_id] += 1
        if nth not in changed.get(org_id, set()):
            return match.group(0)
        return f'<OrgQuestion ORGQ_ID="{org_id}">{open_subject}{subject}"{between}"{body}{close}'

    text, n = ORG_TEXT.subn(edit, SEMEVAL_DEV.read_text(encoding="utf-8"))
    assert n == 500 and all(seen[org_id] > max(repeats) for org_id, repeats in changed.items())
    path.write_text(text, encoding="utf-8")
    return path


def semeval_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "es_plugin_bridge.data.readers.semeval" and r.levelname == "WARNING"]


def test_repeats_with_a_stray_quote_keep_the_first_text_and_warn_once(
    tmp_path: Path, dev: Dataset, caplog: pytest.LogCaptureFixture
) -> None:
    path = dev_with_stray_quotes(tmp_path / "quoted.xml", {"Q268": {3}, "Q270": {1, 9}})
    with caplog.at_level("WARNING"):
        dataset = read_semeval(path)
    # Everything is read as from the clean file: the repeats are the same question, first text kept.
    assert dataset.queries == dev.queries
    assert dataset.questions == dev.questions
    assert dataset.questions["Q268"].title == "Good Bank"
    (message,) = semeval_warnings(caplog)
    assert "3 repeated <OrgQuestion> have a different text" in message
    assert "(Q268, Q270)" in message and str(path) in message


def test_the_first_text_of_a_repeated_question_is_the_one_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = dev_with_stray_quotes(tmp_path / "quoted.xml", {"Q268": {0}})
    with caplog.at_level("WARNING"):
        dataset = read_semeval(path)
    query = next(query for query in dataset.queries if query.query.id == "Q268")
    assert (query.query.title, query.query.body) == (
        'Good Bank"', '"Which is a good bank as per your experience in Doha')
    assert len(query.candidates) == 10
    # The nine later repeats all differ from the (stray) first text, and one warning says so.
    (message,) = semeval_warnings(caplog)
    assert "9 repeated <OrgQuestion> have a different text" in message


def test_clean_file_reads_without_warning(dev: Dataset, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING"):
        read_semeval(SEMEVAL_DEV)
    assert semeval_warnings(caplog) == []


def test_a_thread_with_two_ids_stays_an_error(tmp_path: Path) -> None:
    text = SEMEVAL_DEV.read_text(encoding="utf-8")
    assert text.count('<Thread THREAD_SEQUENCE="Q268_R5"') == 1
    path = tmp_path / "two-ids.xml"
    path.write_text(text.replace('<Thread THREAD_SEQUENCE="Q268_R5"', '<Thread THREAD_SEQUENCE="Q268_R6"'),
                    encoding="utf-8")
    line = text[: text.index('<Thread THREAD_SEQUENCE="Q268_R5"')].count("\n") + 1
    with pytest.raises(DataFormatError, match="two ids for one thread") as caught:
        read_semeval(path)
    assert caught.value.where == str(line)
    assert "'Q268_R6'" in caught.value.problem and "'Q268_R5'" in caught.value.problem
    dataset = read_semeval(path, skip_bad=True)
    assert dataset.skipped == 1
    assert sum(len(query.candidates) for query in dataset.queries) == 499
