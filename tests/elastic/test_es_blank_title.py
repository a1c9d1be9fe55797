"""A question with a blank title is ranked the same way by ``bridge`` and by ``native`` (issue 45), on a
real trial-licence Elasticsearch (testcontainers; skipped, with the reason, without Docker): the
Elasticsearch twin of ``tests/opensearch/test_opensearch_blank_title.py``, on its data and queries.

Elasticsearch's rules relied on (elastic/elasticsearch):

- ``server/src/main/java/org/elasticsearch/search/rank/feature/RankFeatureShardPhase.java``: for the
  window's documents each shard fetches the ``text_similarity_reranker``'s ``field`` alone, through the
  fetch phase's ``fields`` sub-phase (a ``FetchFieldsContext`` of that one field); for a ``text`` field
  (``rerank_text`` is ``text``, ``index: false``) the value fetcher reads ``_source``
  (``server/src/main/java/org/elasticsearch/index/mapper/TextFieldMapper.java``:
  ``SourceValueFetcher.toString``). So what mode native sends for a document is its stored
  ``_source.rerank_text``, which ``es index`` writes as ``<p>body</p>`` for a blank title.
- ``server/src/main/java/org/elasticsearch/search/rank/rerank/RerankingRankFeaturePhaseRankShardContext.java``
  and ``x-pack/plugin/inference/src/main/java/org/elasticsearch/xpack/inference/rank/textsimilarity/
  TextSimilarityRerankingRankFeaturePhaseRankShardContext.java``: each hit's feature data is
  ``hit.field(field).getValue().toString()``; a hit without the field has none.
- ``x-pack/plugin/inference/src/main/java/org/elasticsearch/xpack/inference/rank/textsimilarity/
  TextSimilarityRankFeaturePhaseRankCoordinatorContext.java``: one inference input per window document
  (its feature data) with ``inference_text``; the search fails unless as many scores come back as
  documents went out; each score ``s`` is rewritten ``max(s, 0) + min(exp(s), 1)``, i.e. ``s + 1`` for
  the sidecar's non-negative ``/v1/rerank?score=linear`` scores.
- ``x-pack/plugin/rank-rrf/src/main/java/org/elasticsearch/xpack/rank/linear/LinearRetrieverBuilder.java``
  and ``.../linear/MinMaxScoreNormalizer.java``: the ``linear`` score is Σ weight · normalised child
  score (``minmax``: ``(s - min) / (max - min)`` over the first stage's window), sorted best first with
  ties going to the smaller Lucene doc id.

So native scores ``β_fs·minmax(BM25) + linear + 1``, which is ``fused + 1 - shift``
(``serving/relevance.py``: ``linear_shift``), and the bridge asks the sidecar for ``fused`` itself (the
window's first-stage scores sent along), answered as a score increasing with it: the two top tens are
the same ids in the same order, except where documents have exactly equal scores (Elasticsearch orders
those by Lucene doc id, the bridge does not), and the scales differ, so only the order is compared. The
bridge's client once left a blank-title candidate out of its request and put it last with 0.0; here the
blank-title questions in native's window that native ranks in its top ten are in the bridge's, scored.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from docker_available import requires_docker
from es_commands import TITLES, run
from test_es_cluster import _common, network, sidecar, trial  # noqa: F401  (fixtures)

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.text.sidecar_text import rerank_text, unscored_candidate

OPENSEARCH_TWIN = Path(__file__).resolve().parents[1] / "opensearch" / "test_opensearch_blank_title.py"
INDEX = "blank-title"
WINDOW = 30
#: Lines of the AskUbuntu pairs file indexed, as the OpenSearch test does: 300 pairs of titles, 581 unique
#: questions (a title repeated across pairs is one question).
N_LINES = 300
#: How far apart two scores may be and still be one tie: Elasticsearch adds float32s (scores near 1-3).
TIE = 1e-5
#: The data and queries of the OpenSearch test (``test_the_data_is_the_opensearch_tests``).
BLANK = {
    "blank-usb": "install ubuntu from a usb stick: how do I install ubuntu from usb",
    "blank-grub": "grub does not boot after I install ubuntu beside windows; how do I repair grub boot",
    "blank-wifi": "wifi drivers do not work after installing ubuntu; how to install the wireless driver",
}
QUERIES = ["how to install ubuntu from usb", "repair grub boot after install", "install wireless driver"]


def _records(titles: Path) -> list[dict[str, str]]:
    """The questions of the first :data:`N_LINES` lines of the AskUbuntu pairs file (written to ``titles``,
    read as the product reads them) and the three blank-title questions, as ``jsonl:`` records."""
    titles.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[:N_LINES]),
                      encoding="utf-8")
    questions = list(read_spec(f"pairs:{titles}").questions.values())
    records = [{"id": q.id, "title": q.title, "body": q.body} for q in questions]
    return records + [{"id": doc, "title": "", "body": body} for doc, body in BLANK.items()]


def _twin_constants() -> dict[str, object]:
    """``BLANK``, ``QUERIES`` and ``WINDOW`` as the OpenSearch test assigns them (read, not imported)."""
    tree = ast.parse(OPENSEARCH_TWIN.read_text(encoding="utf-8"))
    names = {"BLANK", "QUERIES", "WINDOW"}
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name) and node.targets[0].id in names}


def test_the_data_is_the_opensearch_tests(tmp_path):
    """Without a cluster: the same questions, queries and window as the OpenSearch twin; the 300 lines of
    pairs give between 301 and 600 distinct questions, none blank-titled nor named like a blank one; and
    the product writes each blank question's ``rerank_text`` as ``<p>body</p>``, a text the sidecar
    scores."""
    assert _twin_constants() == {"BLANK": BLANK, "QUERIES": QUERIES, "WINDOW": WINDOW}
    records = _records(tmp_path / "titles.tsv")
    titled = [r for r in records if r["id"] not in BLANK]
    assert N_LINES < len(titled) <= 2 * N_LINES and all(r["title"].strip() for r in titled)
    assert len({r["id"] for r in records}) == len(records)
    for doc, body in BLANK.items():
        question = Question(doc, "", body)
        assert rerank_text(question) == f"<p>{body}</p>"
        assert unscored_candidate(question) is None and unscored_candidate(rerank_text(question)) is None


@pytest.fixture(scope="module")
def indexed(trial, sidecar, tmp_path_factory):  # noqa: F811
    """``es setup`` + ``es index`` (CLI) of the AskUbuntu questions and the three blank-title ones on the
    trial cluster: (Elasticsearch URL, sidecar URL, every stored ``_source`` by id)."""
    from elasticsearch import Elasticsearch

    _, sidecar_url, model = sidecar
    folder = tmp_path_factory.mktemp("blank")
    path = folder / "questions.jsonl"
    records = _records(folder / "titles.tsv")
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    common = _common(trial, sidecar_url)
    assert run(["es", "setup", str(model), "--index", INDEX, "--sidecar-from-es", "http://reranker:8080",
                *common]) == 0
    assert run(["es", "index", f"jsonl:{path}", "--index", INDEX, "--no-progress", *common]) == 0
    es = Elasticsearch(trial, request_timeout=120)
    es.indices.refresh(index=INDEX)
    answer = es.search(index=INDEX, size=10_000, query={"match_all": {}})
    stored = {hit["_id"]: hit["_source"] for hit in answer["hits"]["hits"]}
    assert set(stored) == {r["id"] for r in records}
    assert all(stored[doc]["title"] == "" and stored[doc]["rerank_text"] == f"<p>{body}</p>"
               for doc, body in BLANK.items()), {doc: stored.get(doc) for doc in BLANK}
    return trial, sidecar_url, stored


def _search(cli, common: list[str], query: str, mode: str) -> list[tuple[str, float]]:
    """``esrerank es search QUERY --mode MODE --json`` ranking the whole window: (id, score) best first."""
    code, out, err = cli(["es", "search", query, "--mode", mode, "--window", str(WINDOW),
                          "--top", str(WINDOW), "--json", "--timeout", "30", "--index", INDEX, *common])
    assert code == 0, (mode, err)
    result = json.loads(out)
    assert result["reranked"] is True, (mode, result["fallback_reason"])
    return [(hit["id"], hit["score"]) for hit in result["hits"]]


def _same_top_ten(native: list[tuple[str, float]], bridge: list[tuple[str, float]]) -> None:
    """The same ids rank by rank in both top tens, except two documents whose scores are equal (within
    :data:`TIE`) in both modes; the scores of the whole window are known, so a tie across the tenth
    place is told from a different order."""
    native_score, bridge_score = dict(native), dict(bridge)
    for rank, ((by_native, _), (by_bridge, _)) in enumerate(zip(native[:10], bridge[:10], strict=True)):
        if by_native != by_bridge:
            tied = (abs(native_score[by_native] - native_score[by_bridge]) <= TIE
                    and abs(bridge_score[by_native] - bridge_score[by_bridge]) <= TIE)
            assert tied, (rank, native[:10], bridge[:10])


@pytest.mark.elasticsearch
@pytest.mark.slow
@requires_docker
@pytest.mark.parametrize("query", QUERIES)
def test_bridge_and_native_rank_a_blank_title_the_same_way(indexed, query, cli):
    """On the node: one first-stage window for both modes, ranked whole by each; the same top ten up to
    exactly-equal scores; the blank-title questions native ranks in its top ten are in the bridge's,
    scored above 0.0."""
    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
    from es_plugin_bridge.data.questions import question_from_text
    from es_plugin_bridge.elastic.cluster.connection import Connection
    from es_plugin_bridge.elastic.modes.factory import open_mode

    es_url, sidecar_url, _ = indexed
    cluster = Connection(url=es_url, timeout=30).open()
    stage = open_mode(cluster, INDEX, "bridge", "bm25", window=WINDOW,
                      sidecar=SidecarTarget(sidecar_url, None, 30.0)).stage
    window = {doc for doc, _ in stage.search(question_from_text(query), WINDOW)}
    blank_in_window = window & set(BLANK)
    assert blank_in_window, f"no blank-title question in the window of {query!r}"
    common = _common(es_url, sidecar_url)
    native, bridge = _search(cli, common, query, "native"), _search(cli, common, query, "bridge")
    assert {doc for doc, _ in native} == {doc for doc, _ in bridge} == window  # one window, all ranked
    _same_top_ten(native, bridge)
    native_top, bridge_top = dict(native[:10]), dict(bridge[:10])
    ranked_blank = blank_in_window & set(native_top)
    assert ranked_blank, (query, native[:10])  # a body that repeats the query is among the top ten
    assert ranked_blank <= set(bridge_top), (query, bridge[:10])
    assert all(bridge_top[doc] > 0.0 and native_top[doc] > 0.0 for doc in ranked_blank), (native, bridge)

