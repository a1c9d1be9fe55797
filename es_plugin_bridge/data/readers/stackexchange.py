"""``stackexchange``: a Stack Exchange data dump directory holding ``Posts.xml`` and ``PostLinks.xml``.

Questions are the ``Posts.xml`` rows with ``PostTypeId="1"`` (``Id``, ``Title``, HTML ``Body``);
answers and every other post type are passed over. Duplicates are the ``PostLinks.xml`` rows with
``LinkTypeId="3"`` (``PostId`` is the duplicate, ``RelatedPostId`` the question it duplicates) and
become Pairs with label 1. Dumps leave deleted posts out but keep their links, so a link whose
post is absent (or is not a question) is dropped and the number of such links logged, not reported
as bad. Either file may be gzip-compressed (``Posts.xml.gz``).

Both files are streamed with lxml's iterparse, each row cleared (and its earlier siblings
deleted) once read, so a multi-GB dump is read in memory bounded by the questions kept, not by
the file.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lxml import etree

from es_plugin_bridge.data.readers._common import BadRecords, RecordError, add_questions, require_data_file
from es_plugin_bridge.data.readers._xml import iter_elements, line_of
from es_plugin_bridge.data.types import Dataset, Pair, Question
from es_plugin_bridge.errors import DataFormatError

QUESTION_POST_TYPE = "1"
DUPLICATE_LINK_TYPE = "3"

log = logging.getLogger(__name__)


def read_stackexchange(directory: Path, *, skip_bad: bool = False) -> Dataset:
    """Read a dump directory's questions and duplicate links (``Posts.xml``, ``PostLinks.xml``)."""
    directory = Path(directory)
    posts = require_data_file(directory, "Posts.xml")
    links = require_data_file(directory, "PostLinks.xml")
    dataset = Dataset(name=directory.name)
    skipped = _read_questions(posts, dataset, skip_bad)
    skipped += _read_duplicates(links, dataset, skip_bad)
    dataset.skipped = skipped
    return dataset


def _read_questions(path: Path, dataset: Dataset, skip_bad: bool) -> int:
    bad = BadRecords(path, skip_bad)
    rows = 0
    for row in iter_elements(path, "row"):
        rows += 1
        if row.get("PostTypeId") != QUESTION_POST_TYPE:
            continue
        try:
            add_questions(dataset, _question(row))
        except RecordError as error:
            bad.report(line_of(row), str(error))
    if rows == 0:
        raise DataFormatError(str(path), "1", "no <row> element: not a Stack Exchange Posts.xml")
    return bad.skipped


def _question(row: etree._Element) -> Question:
    post_id = row.get("Id")
    if not post_id:
        raise RecordError("question <row> has no Id")
    title = row.get("Title")
    if title is None:
        raise RecordError(f"question <row Id={post_id!r}> has no Title")
    return Question(post_id, title.strip(), (row.get("Body") or "").strip())


def _read_duplicates(path: Path, dataset: Dataset, skip_bad: bool) -> int:
    bad = BadRecords(path, skip_bad)
    dangling = 0
    for row in iter_elements(path, "row"):
        try:
            link_type, post_id, related_id = (
                _required(row, name) for name in ("LinkTypeId", "PostId", "RelatedPostId")
            )
        except RecordError as error:
            bad.report(line_of(row), str(error))
            continue
        if link_type != DUPLICATE_LINK_TYPE:
            continue
        q1, q2 = dataset.questions.get(post_id), dataset.questions.get(related_id)
        if q1 is None or q2 is None:
            dangling += 1
            continue
        dataset.pairs.append(Pair(q1, q2, 1))
    if dangling:
        log.info(
            "%s: %d duplicate links name a post that is not a question of Posts.xml; dropped", path, dangling
        )
    return bad.skipped


def _required(row: etree._Element, name: str) -> str:
    value = row.get(name)
    if not value:
        raise RecordError(f"<row Id={row.get('Id')!r}> has no {name}")
    return value
