"""A question with a blank title is ranked the same way by the client and by the engine (issue 45).

The engine-side modes (``native`` on Elasticsearch, ``rerank`` here on OpenSearch) send each candidate as
its stored ``rerank_text``, ``<p>body</p>`` for a blank title, which the sidecar reads as a body and
scores. The bridge's client once left such a candidate out of its request and put it last with 0.0; it
now leaves out only what the server itself would not score (``text.sidecar_text.unscored_candidate``).
On the node, for queries whose window holds blank-title questions: ``bridge``'s top 10 is the sidecar's
fused order of that window sent as the engine sends it (the ``rerank_text`` strings, with the
first-stage scores), and ``rerank``'s is the sidecar's own order of the same strings; the blank-title
questions are in both top tens, scored.
"""

from __future__ import annotations

import json

import pytest
from es_commands import TITLES, TOKEN, common, run, sources
from live_sidecar import post

from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic.cluster.connection import Connection
from es_plugin_bridge.elastic.modes.factory import open_mode

pytestmark = [pytest.mark.engine, pytest.mark.slow]

INDEX = "blank-title"
WINDOW = 30
BLANK = {
    "blank-usb": "install ubuntu from a usb stick: how do I install ubuntu from usb",
    "blank-grub": "grub does not boot after I install ubuntu beside windows; how do I repair grub boot",
    "blank-wifi": "wifi drivers do not work after installing ubuntu; how to install the wireless driver",
}
QUERIES = ["how to install ubuntu from usb", "repair grub boot after install", "install wireless driver"]


@pytest.fixture(scope="module")
def indexed(opensearch, sidecar, tmp_path_factory):
    """300 AskUbuntu titles and three questions with a blank title and a body, set up and indexed through
    the CLI: (sidecar URL, every stored ``_source`` by id)."""
    url, model = sidecar
    path = tmp_path_factory.mktemp("blank") / "questions.jsonl"
    titles = tmp_path_factory.mktemp("titles") / "titles.tsv"
    titles.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[:300]),
                      encoding="utf-8")
    questions = list(read_spec(f"pairs:{titles}").questions.values())
    records = [{"id": q.id, "title": q.title, "body": q.body} for q in questions]
    records += [{"id": doc, "title": "", "body": body} for doc, body in BLANK.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert run(["es", "setup", str(model), "--index", INDEX, *common(opensearch, url)]) == 0
    assert run(["es", "index", f"jsonl:{path}", "--index", INDEX, "--no-progress",
                *common(opensearch, url)]) == 0
    stored = sources(opensearch, INDEX)
    assert all(stored[doc]["title"] == "" and stored[doc]["rerank_text"] == f"<p>{body}</p>"
               for doc, body in BLANK.items())
    return url, stored


def _sidecar_order(url: str, query: str, window: list[tuple[str, float]], stored: dict,
                   fused: bool) -> list[tuple[str, float]]:
    """The sidecar's scores of ``window`` sent as an engine sends it (each ``rerank_text``), best first;
    ``fused``: with the first-stage scores, as the bridge asks."""
    body: dict = {"query": query, "documents": [stored[doc]["rerank_text"] for doc, _ in window]}
    if fused:
        body |= {"first_stage_scores": [score for _, score in window], "first_stage": "bm25"}
    status, answer = post(f"{url}/v1/rerank", body, TOKEN)
    assert status == 200, answer
    return [(window[r["index"]][0], r["relevance_score"]) for r in answer["results"]]


def _same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    """The same scores per rank, and the same documents once ties (equal scores) are grouped."""
    assert [s for _, s in got] == pytest.approx([s for _, s in want[:len(got)]], abs=1e-5)
    groups: dict[float, set[str]] = {}
    for doc, score in want:
        groups.setdefault(round(score, 5), set()).add(doc)
    assert all(doc in groups[round(score, 5)] for doc, score in got), (got, want[:len(got)])


@pytest.mark.parametrize("query", QUERIES)
def test_bridge_and_the_engines_rerank_score_a_blank_title_the_same_way(indexed, opensearch, query):
    url, stored = indexed
    cluster = Connection(url=opensearch.url, timeout=30).open()
    target = SidecarTarget(url, TOKEN, 30.0)
    bridge = open_mode(cluster, INDEX, "bridge", "bm25", window=WINDOW, sidecar=target)
    rerank = open_mode(cluster, INDEX, "rerank", "bm25", window=WINDOW, sidecar=target)
    question = question_from_text(query)
    window = bridge.stage.search(question, WINDOW)
    blank_in_window = {doc for doc, _ in window} & set(BLANK)
    assert blank_in_window, f"no blank-title question in the window of {query!r}"
    by_bridge, by_engine = bridge.search(question, 10), rerank.search(question, 10)
    assert by_bridge.reranked and by_engine.reranked, (by_bridge.fallback_reason, by_engine.fallback_reason)
    _same_ranking(by_bridge.hits, _sidecar_order(url, query, window, stored, fused=True))
    _same_ranking(by_engine.hits, _sidecar_order(url, query, window, stored, fused=False))
    for hits in (by_bridge.hits, by_engine.hits):
        scores = dict(hits)
        ranked_blank = blank_in_window & set(scores)
        assert ranked_blank, (query, hits)  # a body that repeats the query is among the top ten, scored
        assert all(scores[doc] > 0.0 for doc in ranked_blank)
