"""What the node-loss test and benchmark share (``tests/cluster/test_cluster_node_loss.py``,
``benchmarks/node_loss.py``): the AskUbuntu questions (titles with bodies, then titles), ``es index`` in a
process of its own, and a search load of several clients, each with the product's own mode objects,
that counts every search as answered, answered from first-stage order (fallback) or failed, and times it.

A load only talks to 127.0.0.1 and is bounded twice: in time (``seconds``) and in count
(``max_searches``), so a cluster that stops answering cannot make it run on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "es_plugin_bridge" / "samples" / "askubuntu-pairs"
SHARED_PAIRS = Path("/work/shared/data/askubuntu-pairs")
MODES = ("rerank", "learned-hybrid", "bridge", "vectors", "hybrid", "hybrid-rrf")


def askubuntu_questions(count: int) -> list[Question]:
    """``count`` distinct AskUbuntu questions: the 1,804 with HTML bodies (``val.tsv``) first, then titles
    (``train_titles.tsv``: about 36,000 distinct)."""
    folder = SHARED_PAIRS if (SHARED_PAIRS / "val.tsv").is_file() else PAIRS
    seen: dict[str, Question] = {}
    for name in ("val.tsv", "train_titles.tsv"):
        for question in read_spec(f"pairs:{folder / name}").questions.values():
            seen.setdefault(question.id, question)
            if len(seen) >= count:
                return list(seen.values())
    if len(seen) < count:
        raise ValueError(f"only {len(seen)} distinct AskUbuntu questions, {count} asked for")
    return list(seen.values())


def write_jsonl(questions: Sequence[Question], path: Path) -> str:
    """The questions as a JSON Lines file (their ids kept); its ``jsonl:`` spec."""
    path.write_text("".join(json.dumps({"id": q.id, "title": q.title, "body": q.body}) + "\n"
                            for q in questions), encoding="utf-8")
    return f"jsonl:{path}"


def start_indexing(spec: str, index: str, es_url: str, sidecar_url: str, token: str, *extra: str
                   ) -> subprocess.Popen:
    """``esrerank es index SPEC`` in a process of its own (a real run, killable), the token from the
    environment as a deployment keeps it."""
    exe = Path(sys.executable).with_name("esrerank")
    return subprocess.Popen([str(exe), "es", "index", spec, "--index", index, "--no-progress",
                             "--es-url", es_url, "--sidecar", sidecar_url, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "ESRERANK_TOKEN": token})


@dataclass(frozen=True)
class Answer:
    """One search's top 10 (ids and scores) and whether the sidecar reranked it."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]
    reranked: bool


@dataclass
class Tally:
    """One mode's searches: how each ended, the slowest, the failures' lines, each answer by query."""

    answered: int = 0
    fallback: int = 0
    failed: int = 0
    slowest_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    #: failures that were not the product's one-line ``UserError`` (a traceback's type and message)
    unclean: list[str] = field(default_factory=list)
    answers: list[tuple[str, Answer]] = field(default_factory=list)

    def add(self, other: Tally) -> None:
        self.answered += other.answered
        self.fallback += other.fallback
        self.failed += other.failed
        self.slowest_s = max(self.slowest_s, other.slowest_s)
        self.errors += other.errors
        self.unclean += other.unclean
        self.answers += other.answers

    def summary(self) -> dict[str, Any]:
        """The JSON figures: counts, the slowest search, and the distinct failure lines (at most 5)."""
        return {"searches": self.answered + self.fallback + self.failed, "answered": self.answered,
                "fallback": self.fallback, "failed": self.failed, "slowest_s": round(self.slowest_s, 3),
                "unclean_failures": len(self.unclean),
                "failure_lines": sorted(set(self.errors))[:5]}


def open_searcher(es_url: str, index: str, mode: str, sidecar_url: str, token: str, *,
                  es_timeout: float, sidecar_timeout: float, window: int) -> Any:
    """The mode object ``es search --mode MODE`` builds (its own client: one per load client)."""
    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
    from es_plugin_bridge.elastic.cluster.connection import Connection
    from es_plugin_bridge.elastic.modes.factory import open_mode

    cluster = Connection(url=es_url, timeout=es_timeout).open()
    return open_mode(cluster, index, mode, "bm25", window=window,
                     sidecar=SidecarTarget(sidecar_url, token, sidecar_timeout))


def search_once(searcher: Any, query: str) -> Answer:
    """One ``es search`` of ``query``: its top 10."""
    from es_plugin_bridge.data.questions import question_from_text

    result = searcher.search(question_from_text(query), 10)
    return Answer(tuple(d for d, _ in result.hits), tuple(float(s) for _, s in result.hits),
                  bool(result.reranked))


def search_load(searchers: Sequence[tuple[str, Any]], queries: Sequence[str], *, seconds: float,
                max_searches: int, during: Callable[[], None] | None = None, during_at: float = 0.0,
                ) -> dict[str, Tally]:
    """One thread per ``(mode, searcher)`` searching ``queries`` in turn for ``seconds`` (at most
    ``max_searches`` in all); ``during`` runs ``during_at`` seconds in (the fault). Each mode's tally."""
    from es_plugin_bridge.errors import UserError

    tallies = {mode: Tally() for mode, _ in searchers}
    lock = threading.Lock()
    budget = [max_searches]
    stop_at = time.monotonic() + seconds

    def client(n: int, mode: str, searcher: Any) -> None:
        mine = Tally()
        turn = n
        while time.monotonic() < stop_at:
            with lock:
                if budget[0] <= 0:
                    break
                budget[0] -= 1
            query = queries[turn % len(queries)]
            turn += 1
            start = time.monotonic()
            try:
                answer = search_once(searcher, query)
            except UserError as exc:
                mine.failed += 1
                mine.errors.append(str(exc))
            except Exception as exc:  # noqa: BLE001 - counted: a failure that is not one clear line
                mine.failed += 1
                mine.unclean.append(f"{type(exc).__name__}: {exc}")
            else:
                if answer.reranked:
                    mine.answered += 1
                else:
                    mine.fallback += 1
                mine.answers.append((query, answer))
            mine.slowest_s = max(mine.slowest_s, time.monotonic() - start)
        with lock:
            tallies[mode].add(mine)

    threads = [threading.Thread(target=client, args=(n, mode, searcher), daemon=True)
               for n, (mode, searcher) in enumerate(searchers)]
    for thread in threads:
        thread.start()
    if during is not None:
        time.sleep(during_at)
        during()
    for thread in threads:
        thread.join(timeout=seconds + 120)
        if thread.is_alive():
            raise RuntimeError(f"a search client still runs {seconds + 120:.0f} s after its load ended")
    return tallies


def healthy_answers(searchers: dict[str, Any], queries: Sequence[str]) -> dict[str, dict[str, Answer]]:
    """Each mode's answer to each query on the healthy cluster (one client, in turn)."""
    return {mode: {q: search_once(searcher, q) for q in queries} for mode, searcher in searchers.items()}


def stray_answers(tally: Tally, healthy: dict[str, Answer], first_stage: dict[str, Answer],
                  tolerance: float = 1e-4) -> list[tuple[str, str]]:
    """The answers of a load that differ from the healthy cluster's, as (query, what differs): a
    reranked answer must be the healthy one (ids, scores within ``tolerance``), a fallback the first
    stage's top 10 (its ids)."""
    strays = []
    for query, answer in tally.answers:
        want = healthy[query] if answer.reranked else first_stage[query]
        pairs = zip(answer.scores, want.scores, strict=True) if answer.ids == want.ids else None
        if pairs is None or (answer.reranked and any(abs(a - b) > tolerance * max(1.0, abs(b))
                                                     for a, b in pairs)):
            strays.append((query, f"{query!r}: {answer.ids[:3]} {answer.scores[:3]} != {want.ids[:3]}"))
    return strays


def first_stage_answers(searcher: Any, queries: Sequence[str]) -> dict[str, Answer]:
    """The first stage's own top 10 of each query (what a fallback answers), on the healthy cluster."""
    from es_plugin_bridge.data.questions import question_from_text

    out = {}
    for query in queries:
        hits = searcher.stage.search(question_from_text(query), 10)
        out[query] = Answer(tuple(d for d, _ in hits), tuple(s for _, s in hits), False)
    return out
