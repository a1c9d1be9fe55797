"""``askubuntu``: the AskUbuntu release of Lei et al. (2016), "Semi-supervised Question Retrieval
with Gated Convolutions" — a DIRECTORY holding, each plain or gzip (``NAME`` or ``NAME.gz``):

- ``text_tokenized.txt`` (required): the corpus, ``id<TAB>title<TAB>body`` (body may be absent);
- ``train_random.txt``: ``qid<TAB>similar ids<TAB>random ids`` (ids space-separated) → Pairs,
  label 1 for each similar id, label 0 for each random id that is not also similar;
- ``dev.txt`` / ``test.txt``: ``qid<TAB>similar ids<TAB>candidate ids<TAB>BM25 scores`` (20 candidates
  and 20 scores in the release) → RankingQuery per line, label 1 for the similar candidates,
  ``first_stage_scores`` the BM25 scores, ``split`` "dev" / "test".

Whichever of the last three exist are read. Every id must name a corpus question.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from es_plugin_bridge.data.readers._common import (
    RecordError,
    find_data_file,
    read_line_records,
    require_data_file,
)
from es_plugin_bridge.data.types import Dataset, Pair, Question, RankingQuery

CORPUS = "text_tokenized.txt"
TRAIN = "train_random.txt"
RANKING_SPLITS = {"dev": "dev.txt", "test": "test.txt"}


def read_askubuntu(directory: Path, *, skip_bad: bool = False) -> Dataset:
    """Read the corpus, training pairs and dev/test ranking queries of a Lei et al. directory."""
    directory = Path(directory)
    dataset = Dataset(name=directory.name)
    skipped = _read_corpus(require_data_file(directory, CORPUS), dataset, skip_bad)
    train = find_data_file(directory, TRAIN)
    if train is not None:
        skipped += _read_lines(train, dataset, skip_bad, _train_line)
    for split, name in RANKING_SPLITS.items():
        path = find_data_file(directory, name)
        if path is not None:
            skipped += _read_lines(path, dataset, skip_bad, partial(_ranking_line, split=split))
    dataset.skipped = skipped
    return dataset


def _read_corpus(path: Path, dataset: Dataset, skip_bad: bool) -> int:
    return read_line_records(path, dataset, skip_bad, _corpus_line)


def _corpus_line(dataset: Dataset, line: str) -> None:
    fields = line.split("\t")
    if len(fields) not in (2, 3) or not fields[0].strip():
        raise RecordError(f"expected id<TAB>title<TAB>body, found {len(fields)} tab-separated fields")
    question = Question(fields[0].strip(), fields[1].strip(), fields[2].strip() if len(fields) == 3 else "")
    if question.id in dataset.questions:
        raise RecordError(f"question id {question.id!r} appears twice in the corpus")
    dataset.questions[question.id] = question


def _read_lines(
    path: Path, dataset: Dataset, skip_bad: bool, parse: Callable[[Dataset, list[str]], None]
) -> int:
    """Apply ``parse(dataset, fields)`` to the tab-separated fields of each non-blank line."""
    return read_line_records(path, dataset, skip_bad, lambda data, line: parse(data, line.split("\t")))


def _train_line(dataset: Dataset, fields: list[str]) -> None:
    if len(fields) != 3:
        raise RecordError(
            f"expected qid<TAB>similar ids<TAB>random ids, found {len(fields)} tab-separated fields"
        )
    query = _question(dataset, fields[0].strip())
    similar = _questions(dataset, fields[1])
    similar_ids = {question.id for question in similar}
    negatives = [question for question in _questions(dataset, fields[2]) if question.id not in similar_ids]
    dataset.pairs.extend(Pair(query, question, 1) for question in similar)
    dataset.pairs.extend(Pair(query, question, 0) for question in negatives)


def _ranking_line(dataset: Dataset, fields: list[str], split: str) -> None:
    if len(fields) != 4:
        raise RecordError(
            "expected qid<TAB>similar ids<TAB>candidate ids<TAB>BM25 scores, "
            f"found {len(fields)} tab-separated fields"
        )
    query = _question(dataset, fields[0].strip())
    similar_ids = {question.id for question in _questions(dataset, fields[1])}
    candidates = _questions(dataset, fields[2])
    score_texts = fields[3].split()
    if len(candidates) != len(score_texts):
        raise RecordError(f"{len(candidates)} candidate ids but {len(score_texts)} BM25 scores")
    if not candidates:
        raise RecordError("no candidate ids")
    try:
        scores = [float(text) for text in score_texts]
    except ValueError as error:
        raise RecordError(f"a BM25 score is not a number ({error})") from None
    labels = [int(candidate.id in similar_ids) for candidate in candidates]
    dataset.queries.append(RankingQuery(query, candidates, labels, scores, split=split))


def _question(dataset: Dataset, question_id: str) -> Question:
    question = dataset.questions.get(question_id)
    if question is None:
        raise RecordError(f"question id {question_id!r} is not in {CORPUS}")
    return question


def _questions(dataset: Dataset, ids: str) -> list[Question]:
    return [_question(dataset, question_id) for question_id in ids.split()]
