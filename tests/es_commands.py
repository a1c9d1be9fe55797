"""What the ``esrerank es`` tests on the OpenSearch node share (tests/opensearch/): the sample data, the
sidecar's token, the connection arguments every command takes, and running a command in process where
no ``capsys`` is at hand (a module-scoped fixture)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from live_sidecar import post

from es_plugin_bridge.cli.main import main
from es_plugin_bridge.core.features import bow_features
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.text.sidecar_text import rerank_text

SAMPLES = Path(__file__).resolve().parents[1] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
TOKEN = "es-commands-t0ken"
#: How far a stored vector component may be from the sidecar's own: float noise of the encoder across
#: batches (tests/opensearch/test_opensearch_ingest.py explains the bound).
VECTOR_TOLERANCE = 1e-6


def common(opensearch, sidecar_url: str) -> list[str]:
    """``--es-url``, ``--sidecar`` and ``--token`` of one command against the node and a sidecar."""
    return ["--es-url", opensearch.url, "--sidecar", sidecar_url, "--token", TOKEN]


def run(argv: list[str]) -> int:
    """``esrerank ARGV`` through the console entry point's own code; its exit status."""
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def sources(opensearch, index: str) -> dict[str, dict]:
    answer = opensearch.ok("POST", f"/{index}/_search", {"size": 10_000, "query": {"match_all": {}}})
    return {hit["_id"]: hit["_source"] for hit in answer["hits"]["hits"]}


def embeddings(url: str, questions: list[Question]) -> dict[str, dict]:
    """The sidecar's own ``/v1/encode`` answer per question (500 texts a call)."""
    out = {}
    for start in range(0, len(questions), 500):
        batch = questions[start:start + 500]
        status, answer = post(f"{url}/v1/encode", {"texts": [rerank_text(q) for q in batch]}, TOKEN)
        assert status == 200, answer
        out.update({q.id: e for q, e in zip(batch, answer["embeddings"], strict=True)})
    return out


def assert_stored_as_embedded(stored: dict, embedding: dict, question: Question) -> None:
    """One document holds the sidecar's vector (:data:`VECTOR_TOLERANCE`) and BOW (float32-equal)."""
    assert stored["rerank_text"] == rerank_text(question)
    if mappings.has_direction(embedding["vector"]):
        gap = np.abs(np.float32(stored["vector"]) - np.float32(embedding["vector"])).max()
        assert gap <= VECTOR_TOLERANCE, (question.id, gap)
    else:
        assert "vector" not in stored  # the k-NN plugin refuses a zero vector under cosinesimil
    want = bow_features(embedding["terms"])
    got = stored.get("bow", {})
    assert set(got) == set(want), question.id
    assert all(np.float32(got[key]) == np.float32(want[key]) for key in want), question.id


def ranking_differences(got: list[tuple[str, float]], want: list[tuple[str, float]], spread: float,
                        scores: bool = True) -> list[str]:
    """What differs between a mode's top 10 and its ranker's (empty: the same). The ids in order, except
    where the ranker's own scores of the documents involved lie within ``spread`` (the rank_features
    truncation can swap such near-ties, no more); and each score is the ranker's for the same document
    plus one constant whose spread is at most ``spread`` (``scores`` False: the ids alone).
    tests/opensearch/test_opensearch_vectors.py explains the bound."""
    score = dict(want)
    ids = [doc for doc, _ in got]
    if ids != [doc for doc, _ in want[:10]]:
        if any(doc not in score for doc in ids):
            return [f"documents outside the ranker's window: {[d for d in ids if d not in score]}"]
        ranked = [score[doc] for doc in ids]
        tenth = want[min(10, len(want)) - 1][1]
        swapped = any(b > a + spread for a, b in zip(ranked, ranked[1:], strict=False))
        if swapped or any(s < tenth - spread for s in ranked):
            return [f"order {ids} != {[d for d, _ in want[:10]]}"]
    gaps = [value - score[doc] for doc, value in got]
    if scores and gaps and max(gaps) - min(gaps) > spread:
        return [f"scores are not the ranker's plus one constant: gaps {gaps}"]
    return []


def ctrl_c_reaches_it() -> None:
    """``preexec_fn`` of a command a test stops with SIGINT: SIGINT back to its default in the child. A
    shell starts a background job (``make test &``, ``nohup``) with SIGINT ignored, the children inherit
    that, and Python then installs no KeyboardInterrupt handler: the command would never see the test's
    Ctrl-C and run to its end (found running the suite in the background)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
