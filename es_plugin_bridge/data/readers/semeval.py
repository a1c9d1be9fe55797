"""``semeval``: SemEval-2016 Task 3 subtask B XML (Qatar Living question-question reranking).

Each ``OrgQuestion`` (id ``ORGQ_ID``) holds a ``Thread`` whose ``RelQuestion`` was found by the
organisers' search engine at rank ``RELQ_RANKING_ORDER`` and labelled ``RELQ_RELEVANCE2ORGQ``.
The same ``OrgQuestion`` repeats once per thread in some files, so threads are grouped by
``ORGQ_ID`` (in order of first appearance) into one RankingQuery, candidates ordered by rank, with
``first_stage_scores = -rank`` (higher is better) and labels PerfectMatch 2, Relevant 1,
Irrelevant 0. The comments (``RelComment/RelCText``) are kept as unlabelled text. The file is
streamed, one ``OrgQuestion`` at a time.

A repeated ``ORGQ_ID`` is the same question even when its text differs: the official 2016 test file
has one repeat whose subject and body carry a stray quote character. The first text is kept and
one warning (logged) counts the differing repeats. Real contradictions stay errors: a ``Thread``
whose ``THREAD_SEQUENCE`` names another id than its ``RELQ_ID``, a ``RELQ_ID`` listed twice for
one original question, an id naming two different texts across questions.

With skip_bad, a bad ``Thread`` (or an ``OrgQuestion`` without id) is skipped and counted;
malformed XML always stops the reader, since no later record can be trusted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from es_plugin_bridge.data.readers._common import BadRecords, RecordError, add_questions
from es_plugin_bridge.data.readers._xml import iter_elements, line_of
from es_plugin_bridge.data.types import Dataset, Question, RankingQuery
from es_plugin_bridge.errors import DataFormatError

LABELS = {"PerfectMatch": 2, "Relevant": 1, "Irrelevant": 0}

log = logging.getLogger(__name__)


@dataclass
class _Group:
    """The threads of one ORGQ_ID seen so far: (rank, candidate, label) triples."""

    query: Question
    threads: list[tuple[int, Question, int]] = field(default_factory=list)


def read_semeval(path: Path, *, skip_bad: bool = False) -> Dataset:
    """Read a SemEval-2016 Task 3 XML file (plain or gzip) into ranking queries and questions."""
    path = Path(path)
    dataset = Dataset(name=path.name)
    bad = BadRecords(path, skip_bad)
    groups: dict[str, _Group] = {}
    differing: dict[str, int] = {}
    seen = 0
    for element in iter_elements(path, "OrgQuestion"):
        seen += 1
        try:
            query = _org_question(element)
            group = groups.get(query.id)
            if group is None:
                group = groups[query.id] = _Group(add_questions(dataset, query)[0])
            elif group.query != query:
                differing[query.id] = differing.get(query.id, 0) + 1
        except RecordError as error:
            bad.report(line_of(element), str(error))
            continue
        for thread in element.iterfind("Thread"):
            try:
                _add_thread(dataset, group, thread)
            except RecordError as error:
                bad.report(line_of(thread), str(error))
    if seen == 0:
        raise DataFormatError(str(path), "1", "no <OrgQuestion> element: not a SemEval-2016 Task 3 file")
    if differing:
        _warn_differing(path, differing)
    dataset.queries = [_ranking_query(group) for group in groups.values() if group.threads]
    dataset.skipped = bad.skipped
    return dataset


def _warn_differing(path: Path, differing: dict[str, int]) -> None:
    """One warning for the whole file: how many repeats differ from their first text, and where."""
    total = sum(differing.values())
    shown = ", ".join(list(differing)[:5]) + (", ..." if len(differing) > 5 else "")
    log.warning(
        "%s: %d repeated <OrgQuestion> %s a different text than the first with the same ORGQ_ID (%s); "
        "kept the first text",
        path, total, "has" if total == 1 else "have", shown,
    )


def _org_question(element: etree._Element) -> Question:
    org_id = element.get("ORGQ_ID")
    if not org_id:
        raise RecordError("<OrgQuestion> has no ORGQ_ID")
    return Question(org_id, _child_text(element, "OrgQSubject"), _child_text(element, "OrgQBody"))


def _add_thread(dataset: Dataset, group: _Group, thread: etree._Element) -> None:
    related = thread.find("RelQuestion")
    if related is None:
        raise RecordError("<Thread> has no <RelQuestion>")
    rel_id = related.get("RELQ_ID")
    if not rel_id:
        raise RecordError("<RelQuestion> has no RELQ_ID")
    sequence = thread.get("THREAD_SEQUENCE")
    if sequence and sequence != rel_id:
        raise RecordError(
            f"<Thread THREAD_SEQUENCE={sequence!r}> holds <RelQuestion RELQ_ID={rel_id!r}>: "
            "two ids for one thread"
        )
    rank_text = related.get("RELQ_RANKING_ORDER", "")
    try:
        rank = int(rank_text)
    except ValueError:
        raise RecordError(
            f"<RelQuestion RELQ_ID={rel_id!r}>: RELQ_RANKING_ORDER {rank_text!r} is not an integer"
        ) from None
    label_text = related.get("RELQ_RELEVANCE2ORGQ")
    if label_text not in LABELS:
        raise RecordError(
            f"<RelQuestion RELQ_ID={rel_id!r}>: RELQ_RELEVANCE2ORGQ {label_text!r} "
            f"is not one of {', '.join(LABELS)}"
        )
    if any(candidate.id == rel_id for _, candidate, _ in group.threads):
        raise RecordError(f"<RelQuestion RELQ_ID={rel_id!r}> repeats for ORGQ_ID {group.query.id!r}")
    candidate = Question(rel_id, _child_text(related, "RelQSubject"), _child_text(related, "RelQBody"))
    comments = [_child_text(comment, "RelCText") for comment in thread.iterfind("RelComment")]
    (candidate,) = add_questions(dataset, candidate)
    group.threads.append((rank, candidate, LABELS[label_text]))
    dataset.unlabelled.extend(text for text in comments if text.strip())


def _child_text(element: etree._Element, tag: str) -> str:
    child = element.find(tag)
    if child is None:
        raise RecordError(f"<{element.tag}> has no <{tag}>")
    return (child.text or "").strip()


def _ranking_query(group: _Group) -> RankingQuery:
    threads = sorted(group.threads, key=lambda thread: thread[0])
    return RankingQuery(
        query=group.query,
        candidates=[candidate for _, candidate, _ in threads],
        labels=[label for _, _, label in threads],
        first_stage_scores=[-float(rank) for rank, _, _ in threads],
    )
