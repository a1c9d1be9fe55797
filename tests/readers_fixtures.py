"""Builders of reader test inputs written in each format's exact layout, and access to ../shared data."""

from __future__ import annotations

import gzip
import random
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TRAIN_TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
VAL = SAMPLES / "askubuntu-pairs" / "val.tsv"
SHARED_DATA = REPO.parent / "shared" / "data"

_VOCABULARY = """
ubuntu install boot grub kernel driver wifi network nvidia screen sound update upgrade package
apt partition disk mount usb terminal sudo permission error file folder window desktop unity
gnome server ssh firewall printer keyboard mouse laptop battery suspend login password user
"""
WORDS = _VOCABULARY.split()


def shared_file(relative: str) -> Path:
    """A file of ../shared/data, or skip the test (the suite must pass where ../shared is absent)."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"{path} not present (only on machines with ../shared)")
    return path


def write_text(path: Path, text: str, *, gz: bool = False) -> Path:
    """Write UTF-8 ``text`` to ``path`` (``path.gz``, compressed, when gz); return the written path."""
    if gz:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wt", encoding="utf-8", newline="") as stream:
            stream.write(text)
    else:
        path.write_text(text, encoding="utf-8", newline="")
    return path


def sentence(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


@dataclass
class AskUbuntuRelease:
    """What a written Lei et al. directory holds, for checking the reader against."""

    corpus: dict[str, tuple[str, str]]
    train: list[tuple[str, list[str], list[str]]]
    ranking: dict[str, list[tuple[str, list[str], list[str], list[float]]]] = field(default_factory=dict)


def write_askubuntu_release(directory: Path, *, gz: bool = False, seed: int = 7) -> AskUbuntuRelease:
    """Write a small release in the exact layout of Lei et al. (2016): corpus, train_random, dev, test.

    Ids are numeric strings as in the release; the corpus has a question with an empty body; a
    train line lists a similar id among its random ids too (the reader must not make it a negative).
    """
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    ids = [str(1000 + 37 * i) for i in range(60)]
    corpus = {qid: (sentence(rng, 6), sentence(rng, 25)) for qid in ids}
    corpus[ids[5]] = (corpus[ids[5]][0], "")
    lines = [
        f"{qid}\t{title}\t{body}" if body else f"{qid}\t{title}\t" for qid, (title, body) in corpus.items()
    ]
    write_text(directory / "text_tokenized.txt", "\n".join(lines) + "\n", gz=gz)

    train = []
    for i in range(10):
        similar = rng.sample(ids[20:], 2)
        randoms = rng.sample(ids[20:], 8)
        if i == 0:
            randoms[0] = similar[0]
        train.append((ids[i], similar, randoms))
    write_text(
        directory / "train_random.txt",
        "".join(f"{q}\t{' '.join(s)}\t{' '.join(r)}\n" for q, s, r in train),
        gz=gz,
    )
    release = AskUbuntuRelease(corpus, train)
    for split, offset in (("dev", 10), ("test", 15)):
        rows = []
        for i in range(offset, offset + 5):
            candidates = rng.sample(ids[20:], 20)
            similar = [candidates[3], candidates[11]] if i % 2 else [candidates[0]]
            scores = sorted((round(rng.uniform(5, 60), 4) for _ in candidates), reverse=True)
            rows.append((ids[i], similar, candidates, scores))
        release.ranking[split] = rows
        write_text(
            directory / f"{split}.txt",
            "".join(f"{q}\t{' '.join(s)}\t{' '.join(c)}\t{' '.join(map(str, sc))}\n" for q, s, c, sc in rows),
            gz=gz,
        )
    return release


@dataclass
class StackExchangeDump:
    """What a written dump holds, for checking the reader against."""

    directory: Path
    questions: dict[str, tuple[str, str]]
    duplicates: list[tuple[str, str]]
    n_answers: int
    posts_bytes: int


def _row(**attributes: str) -> str:
    """One dump row; newlines in values written as ``&#xA;`` as the dumps do."""
    entities = {'"': "&quot;", "\n": "&#xA;", "\r": "&#xD;"}
    pairs = (f'{name}="{escape(value, entities)}"' for name, value in attributes.items())
    return f"  <row {' '.join(pairs)} />\n"


def write_stackexchange_dump(
    directory: Path, *, n_questions: int, answer_bytes: int, answers_per_question: int, seed: int = 3
) -> StackExchangeDump:
    """Write ``Posts.xml`` and ``PostLinks.xml`` as a Stack Exchange dump lays them out.

    Each question (PostTypeId 1) is followed by its answers (PostTypeId 2) of about
    ``answer_bytes`` bytes of HTML body each, with a tag-wiki post (PostTypeId 4) now and then. Links
    are duplicates (LinkTypeId 3) between questions, plain links (LinkTypeId 1), and duplicates
    naming an answer or a deleted post (absent from Posts.xml), which the reader must drop.
    """
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    answer_bodies = []
    for _ in range(64):
        paragraphs = []
        while sum(map(len, paragraphs)) < answer_bytes:
            code = f"<pre><code>sudo apt-get install {rng.choice(WORDS)}\n</code></pre>\n"
            paragraphs.append(f"<p>{sentence(rng, 30)} &amp; more</p>\n{code}")
        answer_bodies.append("".join(paragraphs))
    questions: dict[str, tuple[str, str]] = {}
    answer_ids: list[str] = []
    post_id = 0
    with open(directory / "Posts.xml", "w", encoding="utf-8") as posts:
        posts.write('<?xml version="1.0" encoding="utf-8"?>\n<posts>\n')
        for number in range(n_questions):
            post_id += 1
            question_id = str(post_id)
            title = f"How do I fix {sentence(rng, 5)} <{number}> on 12.04?"
            body = f'<p>{sentence(rng, 40)}</p>\n<p>Tried "{sentence(rng, 3)}" &amp; rebooted.</p>\n'
            questions[question_id] = (title, body)
            posts.write(
                _row(
                    Id=question_id,
                    PostTypeId="1",
                    AcceptedAnswerId=str(post_id + 1),
                    CreationDate="2012-05-01T10:11:12.130",
                    Score=str(rng.randint(-2, 50)),
                    ViewCount=str(rng.randint(10, 9000)),
                    Body=body,
                    OwnerUserId=str(rng.randint(1, 500)),
                    LastActivityDate="2013-01-02T03:04:05.060",
                    Title=title,
                    Tags="<boot><grub2>",
                    AnswerCount=str(answers_per_question),
                    CommentCount="1",
                    ContentLicense="CC BY-SA 3.0",
                )
            )
            for _ in range(answers_per_question):
                post_id += 1
                answer_ids.append(str(post_id))
                posts.write(
                    _row(
                        Id=str(post_id),
                        PostTypeId="2",
                        ParentId=question_id,
                        CreationDate="2012-05-01T11:00:00.000",
                        Score="3",
                        Body=rng.choice(answer_bodies),
                        OwnerUserId="42",
                        LastActivityDate="2012-05-02T11:00:00.000",
                        CommentCount="0",
                        ContentLicense="CC BY-SA 3.0",
                    )
                )
            if number % 50 == 0:
                post_id += 1
                posts.write(_row(Id=str(post_id), PostTypeId="4", Body="<p>Tag wiki excerpt</p>"))
        posts.write("</posts>\n")
    question_ids = list(questions)
    duplicates = [
        (question_ids[i], question_ids[i - 1 - rng.randrange(min(i, 30))]) for i in range(1, n_questions, 4)
    ]
    links = [(source, target, "3") for source, target in duplicates]
    links += [(question_ids[i], question_ids[i - 1], "1") for i in range(2, n_questions, 7)]
    links += [(question_ids[i], answer_ids[i], "3") for i in range(0, min(n_questions, len(answer_ids)), 9)]
    links += [(question_ids[i], str(post_id + 1000 + i), "3") for i in range(0, n_questions, 11)]
    rng.shuffle(links)
    with open(directory / "PostLinks.xml", "w", encoding="utf-8") as stream:
        stream.write('<?xml version="1.0" encoding="utf-8"?>\n<postlinks>\n')
        for number, (source, target, link_type) in enumerate(links, start=1):
            row = _row(
                Id=str(number),
                CreationDate="2013-02-03T04:05:06.070",
                PostId=source,
                RelatedPostId=target,
                LinkTypeId=link_type,
            )
            stream.write(row)
        stream.write("</postlinks>\n")
    duplicate_set = set(duplicates)
    ordered = [(s, t) for s, t, kind in links if kind == "3" and (s, t) in duplicate_set]
    return StackExchangeDump(
        directory, questions, ordered, len(answer_ids), (directory / "Posts.xml").stat().st_size
    )
