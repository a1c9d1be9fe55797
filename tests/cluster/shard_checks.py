"""What the cluster tests of every mode on many shards share (tests/cluster/test_cluster_*): the sidecar,
the sample data cut small, one ``es search --json`` call, and the comparisons of two top 10s.

The data is small on purpose (a few hundred questions: the whole ``make test`` stays well under its
budget) but split over 3 shards it is enough for each shard to hold other statistics:
``test_cluster_first_stage.py`` shows per-shard scores differ from the embedded engine's on it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from es_commands import SAMPLES, TOKEN
from live_sidecar import serve

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question

#: AskUbuntu pairs with their HTML bodies (``<code>``, ``$``, pipes, quotes in them).
ASKUBUNTU_VAL = SAMPLES / "askubuntu-pairs" / "val.tsv"
Hits = list[tuple[str, float]]


@contextlib.contextmanager
def bow_cnn_sidecar(exported: dict, token_dir: Path) -> Iterator[tuple[str, Path]]:
    """A live sidecar serving the tiny BOW-CNN with ``es_commands.TOKEN``: (URL, model directory)."""
    with serve(exported["bow-cnn"], TOKEN, token_dir) as url:
        yield url, exported["bow-cnn"]


def connection(cluster, url: str) -> list[str]:
    """``--es-url`` (the first node; it coordinates) and the sidecar's options of one command."""
    return ["--es-url", cluster.nodes[0].url, "--sidecar", url, "--token", TOKEN]


def askubuntu_questions(count: int) -> list[Question]:
    """The first ``count`` AskUbuntu questions with bodies (val.tsv), in the order ``es index`` sends them."""
    return list(read_spec(f"pairs:{ASKUBUNTU_VAL}").questions.values())[:count]


def search(cli, cluster, url: str, index: str, text: str, mode: str, window: int, *extra: str) -> dict:
    """``es search --json`` of ``text`` (after ``--``: a title may start with a dash)."""
    code, out, err = cli(["es", "search", "--mode", mode, "--json", "--window", str(window), "--index", index,
                          *extra, *connection(cluster, url), "--", text])
    assert code == 0, (text, err)
    return json.loads(out)


def hits(answer: dict) -> Hits:
    return [(hit["id"], hit["score"]) for hit in answer["hits"]]


def same_ranking(got: Hits, want: Hits, atol: float = 1e-5) -> bool:
    """The same scores (``atol``: float32 noise), and at each score the same documents: within a group
    of equal scores the order is free (the engine orders ties by shard, ``first_stage_ties``), and the
    last group may hold others (it may tie with the unseen next ones)."""
    if len(got) != len(want) or not np.allclose([s for _, s in got], [s for _, s in want], atol=atol):
        return False
    start = 0
    while start < len(want):
        end = start + 1
        while end < len(want) and abs(want[end][1] - want[start][1]) <= atol:
            end += 1
        ours, theirs = {d for d, _ in got[start:end]}, {d for d, _ in want[start:end]}
        if ours != theirs and end < len(want):
            return False
        start = end
    return True


def shard_copies(cluster, index: str) -> dict[str, list[str]]:
    """Node name → the copies of ``index`` it holds (``0p``, ``1r``...), once the index is green and no
    copy of it is moving: green only says every copy is assigned, and the balancer may still be relocating
    one after another test's node restart (a RELOCATING row names its source node, and the copy it is
    building on the target is not listed as started), so the layout is read when it has settled."""
    cluster.nodes[0].ok("GET", f"/_cluster/health/{index}?wait_for_status=green&timeout=120s"
                               "&wait_for_no_relocating_shards=true&wait_for_no_initializing_shards=true")
    rows = cluster.nodes[0].ok("GET", f"/_cat/shards/{index}?format=json")
    found: dict[str, list[str]] = {}
    for row in rows:
        if row["state"] == "STARTED":
            found.setdefault(row["node"], []).append(f"{row['shard']}{row['prirep']}")
    return found


def first_stage_ties(cluster, index: str, text: str, window: int) -> bool:
    """Whether two documents of ``index``'s BM25 top ``window`` for ``text`` score exactly alike (texts
    that tie, e.g. duplicate titles). The engine orders such ties by document within a shard and by shard
    across shards (``SearchPhaseController`` merges by score, then shard): the same scores, another
    order than one shard's, and ``hybrid-rrf`` fuses ranks, so its fused scores of those documents can
    differ. Every score stays the same."""
    from es_plugin_bridge.data.questions import question_from_text
    from es_plugin_bridge.elastic.cluster.opensearch_client import connect
    from es_plugin_bridge.elastic.engine import open_engine
    from es_plugin_bridge.elastic.setup import read_meta
    from es_plugin_bridge.engines.registry import EngineContext
    from es_plugin_bridge.text import Preprocessor

    client = connect(cluster.nodes[0].url)
    meta = read_meta(client, index)
    engine = open_engine(EngineContext(tokens=Preprocessor(meta.text_options()).tokens, options={
        "client": client, "index": index, "fields": (meta.title_field, meta.body_field)}))
    scores = [s for _, s in engine.first_stage("bm25").search(question_from_text(text), window)]
    return any(abs(a - b) <= 1e-6 * max(abs(a), 1.0) for a, b in zip(scores, scores[1:], strict=False))
