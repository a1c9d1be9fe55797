"""mappings/opensearch/apply.py against a real OpenSearch node and a real sidecar process.

apply.py registers the connector, deploys the remote model and puts the ``rerank`` search pipeline;
then a search through that pipeline makes OpenSearch call the sidecar's ``/v1/rerank`` (ml-commons'
``connector.pre_process.cohere.rerank`` fills the connector's request body) and reorders the hits by
its scores. The rule checked on every search: the reranked hits are the first stage's window (the same
query without the pipeline) in the order, and with the scores, the sidecar gives that window when
asked directly. On SemEval-2016 dev and on AskUbuntu questions whose texts hold ``${...}`` shell
variables, backslashes, quotes and long code blocks (ml-commons fills its own ``${parameters.…}``
templates with them). With the sidecar stopped, or slower than the connector's ``read_timeout``, the
processor's ``ignore_failure`` keeps the search answering, in the first stage's order.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from live_sidecar import post, serve, slowed
from opensearch_apply import OPENSEARCH_FILES, apply

from es_plugin_bridge.data.spec import read_spec

pytestmark = [pytest.mark.engine, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
ASKUBUNTU_VAL = SAMPLES / "askubuntu-pairs" / "val.tsv"
TOKEN = "t0ken-${not-a-template}"
SEMEVAL_INDEX, ASKUBUNTU_INDEX = "rerank-semeval", "rerank-askubuntu"


READ_TIMEOUT = json.loads((OPENSEARCH_FILES / "connector.json").read_text())["client_config"]["read_timeout"]


@pytest.fixture(scope="module")
def cluster(opensearch):
    return apply.OpenSearch(opensearch.url)


@pytest.fixture(scope="module")
def sidecar(exported, tmp_path_factory):
    with serve(exported["bow-cnn"], TOKEN, tmp_path_factory.mktemp("token")) as url:
        yield url


@pytest.fixture(scope="module")
def askubuntu_questions():
    pairs = read_spec(f"pairs:{ASKUBUNTU_VAL}").pairs
    return list({q.id: q for p in pairs for q in (p.q1, p.q2)}.values())


@pytest.fixture(scope="module")
def configured(cluster, sidecar, askubuntu_questions):
    model_id = apply.configure(cluster, sidecar, TOKEN)
    apply.index_semeval(cluster, str(SEMEVAL_DEV), SEMEVAL_INDEX)
    apply.index_questions(cluster, askubuntu_questions, ASKUBUNTU_INDEX)
    return model_id


def reranked_as_the_sidecar_ranks_the_window(cluster, sidecar: str, query: str, index: str) -> list[dict]:
    """Assert the module's rule for one query; returns the reranked hits."""
    window = apply.search(cluster, query, index=index, pipeline=None)
    hits = apply.search(cluster, query, index=index)
    assert window, f"no first-stage hit for {query!r}"
    status, direct = post(f"{sidecar}/v1/rerank", {"query": query,
                                                  "documents": [h["_source"]["rerank_text"] for h in window]},
                          TOKEN)
    assert status == 200, direct
    expected = [(window[r["index"]]["_id"], r["relevance_score"]) for r in direct["results"]]
    assert sorted(h["_id"] for h in hits) == sorted(h["_id"] for h in window)
    assert [h["_score"] for h in hits] == pytest.approx([s for _, s in expected], abs=1e-6), query
    by_score = {}
    for doc_id, score in expected:  # ids in the sidecar's order, ties grouped (their order is free)
        by_score.setdefault(round(score, 6), set()).add(doc_id)
    groups = [by_score[round(s, 6)] for s in dict.fromkeys(round(s, 6) for _, s in expected)]
    got, start = [h["_id"] for h in hits], 0
    for group in groups:
        assert set(got[start:start + len(group)]) == group, (query, got, expected)
        start += len(group)
    return hits


def test_apply_deploys_the_model_and_keeps_the_urls_the_cluster_already_trusted(configured, cluster, sidecar,
                                                                              opensearch):
    model = cluster.call("GET", f"/_plugins/_ml/models/{configured}")
    assert model["model_state"] == "DEPLOYED"
    pipeline = cluster.call("GET", f"/_search/pipeline/{apply.PIPELINE}")[apply.PIPELINE]
    processor = pipeline["response_processors"][0]
    assert processor["rerank"]["ml_opensearch"]["model_id"] == configured
    assert processor["rerank"]["ignore_failure"] is True
    trusted = apply.trusted_endpoints(cluster)
    assert apply.trusted_url_regex(sidecar) in trusted
    # the node's own pattern (opensearch.yml, es_plugin_bridge/opensearch_node/node.py) is still there
    assert any("127" in p and p != apply.trusted_url_regex(sidecar) for p in trusted), trusted


def test_semeval_searches_are_reranked_as_the_sidecar_ranks_their_window(configured, cluster, sidecar):
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries[:12]
    moved = 0
    for rq in queries:
        hits = reranked_as_the_sidecar_ranks_the_window(cluster, sidecar, rq.query.title, SEMEVAL_INDEX)
        window = apply.search(cluster, rq.query.title, index=SEMEVAL_INDEX, pipeline=None)
        moved += [h["_id"] for h in hits] != [h["_id"] for h in window]
    assert moved >= len(queries) // 2  # the sidecar really reorders (it is not the first stage again)


def _plain(html_text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", html_text)).split())


def test_askubuntu_searches_holding_shell_variables_quotes_and_backslashes(configured, cluster, sidecar,
                                                                           askubuntu_questions):
    """A user pastes a snippet into the search box: the query text itself holds ``${...}``, ``\\`` and
    quotes, and so do the documents in its window."""
    queries = []
    for mark in ("${", "\\", '"'):
        texts = [_plain(q.body) for q in askubuntu_questions if mark in _plain(q.body)]
        queries += [t[max(0, t.index(mark) - 80):t.index(mark) + 120] for t in texts[:4]]
    assert any("${" in q for q in queries) and any("\\" in q for q in queries)
    assert any('"' in q for q in queries)
    window_texts = []
    for query in queries:
        hits = reranked_as_the_sidecar_ranks_the_window(cluster, sidecar, query, ASKUBUNTU_INDEX)
        window_texts += [h["_source"]["body"] for h in hits]
    assert any("${" in body for body in window_texts)


def test_long_bodies_are_reranked_whole(configured, cluster, sidecar, askubuntu_questions):
    longest = sorted(askubuntu_questions, key=lambda q: len(q.body), reverse=True)[:5]
    assert len(longest[-1].body) > 5_000
    for question in longest:
        hits = reranked_as_the_sidecar_ranks_the_window(cluster, sidecar, question.title, ASKUBUNTU_INDEX)
        assert question.id in [h["_id"] for h in hits]


def _first_stage_order_through(cluster, pipeline: str, query: str) -> tuple[list, list, float]:
    start = time.monotonic()
    hits = apply.search(cluster, query, index=SEMEVAL_INDEX, pipeline=pipeline)
    took = time.monotonic() - start
    window = apply.search(cluster, query, index=SEMEVAL_INDEX, pipeline=None)
    return [(h["_id"], h["_score"]) for h in hits], [(h["_id"], h["_score"]) for h in window], took


def test_a_stopped_sidecar_leaves_the_first_stage_order(configured, cluster, exported, tmp_path):
    with serve(exported["bow-cnn"], TOKEN, tmp_path) as url:
        apply.configure(cluster, url, TOKEN, pipeline="rerank-stopped")
    query = read_spec(f"semeval:{SEMEVAL_DEV}").queries[0].query.title
    got, first_stage, _ = _first_stage_order_through(cluster, "rerank-stopped", query)
    assert got == first_stage and len(got) == 10


def test_a_sidecar_slower_than_the_read_timeout_leaves_the_first_stage_order(configured, cluster, sidecar):
    delay = READ_TIMEOUT + 3
    with slowed(sidecar, delay) as url:
        apply.configure(cluster, url, TOKEN, pipeline="rerank-slow")
        query = read_spec(f"semeval:{SEMEVAL_DEV}").queries[1].query.title
        got, first_stage, took = _first_stage_order_through(cluster, "rerank-slow", query)
    assert got == first_stage
    assert READ_TIMEOUT - 0.5 <= took < delay, took


def test_the_script_runs_end_to_end_as_the_docs_give_it(opensearch, sidecar):
    query = read_spec(f"semeval:{SEMEVAL_DEV}").queries[2].query.title
    script = str(OPENSEARCH_FILES / "apply.py")
    argv = ["--opensearch-url", opensearch.url, "--sidecar-url", sidecar, "--token", TOKEN,
            "--index-sample", str(SEMEVAL_DEV), "--query", query]
    done = subprocess.run([sys.executable, script, *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("model ") and line.endswith(" deployed") for line in lines)
    results = [line for line in lines if re.match(r"^\d\.\d{4}  ", line)]
    assert len(results) == 10
    scores = [float(line.split()[0]) for line in results]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)


def test_a_query_that_is_json_with_quotes_keeps_the_first_stage_order(configured, cluster, sidecar):
    """ml-commons escapes each value before it fills the connector's body, except a value that already
    parses as JSON (``ConnectorUtils.escapeRemoteInferenceInputData``): such a query's quotes break the
    body ("Invalid payload"). With the pipeline's ``ignore_failure`` the search answers all the same, in
    the first stage's order; the same query with its double quotes made single is reranked."""
    query = '{"error": "apt-get install failed"}'
    got, first_stage, _ = _first_stage_order_through(cluster, apply.PIPELINE, query)
    assert got == first_stage and got
    reranked_as_the_sidecar_ranks_the_window(cluster, sidecar, query.replace('"', "'"), SEMEVAL_INDEX)


def test_a_page_beyond_the_last_hit_answers_with_no_hits(configured, cluster):
    """The rerank processor asks ml-commons to score an empty list, which it refuses
    (``TextSimilarityInputDataSet``); ``ignore_failure`` turns that into the empty page it should be."""
    query = read_spec(f"semeval:{SEMEVAL_DEV}").queries[0].query.title
    body = apply.render("query.json", QUERY=query)
    first_stage = {key: value for key, value in body.items() if key != "ext"}
    total = cluster.call("POST", f"/{SEMEVAL_INDEX}/_search", {**first_stage, "track_total_hits": True})
    page = {**body, "from": total["hits"]["total"]["value"] + 10}
    answer = cluster.call("POST", f"/{SEMEVAL_INDEX}/_search?search_pipeline={apply.PIPELINE}", page)
    assert answer["hits"]["hits"] == []


def test_a_narrowed_source_is_not_scored_zero_but_left_in_first_stage_order_with_the_reason(configured,
                                                                                           cluster):
    """Issue 48, finding 7. neural-search 2.19.1's rerank processor reads its document fields from each
    hit's ``fields``, else its ``_source`` in the answer, else sends ``""``
    (``processor/rerank/context/DocumentContextSourceFetcher.java``, ``contextFromSearchHit``; no search
    request processor can add to ``_source``: ``search-pipeline-common``'s ``SearchRequestMap``). So
    ``"_source": ["title"]`` or ``false`` sent blank documents, which the sidecar scored 0.0 each: HTTP 200,
    every hit 0.0, silently. The connector now calls ``/v1/rerank?all_unscored=refuse``: such a window is a
    400 naming rerank_text, the processor fails, and with ``ignore_failure`` the hits keep the first
    stage's order and scores; ``verbose_pipeline`` says why. ``["title", "rerank_text"]``, and
    ``"_source": false`` with ``"fields": ["rerank_text"]``, rank as the whole ``_source`` does."""
    query = read_spec(f"semeval:{SEMEVAL_DEV}").queries[0].query.title

    def answer(extra: dict, pipeline: str | None = apply.PIPELINE, verbose: bool = False) -> dict:
        body = {**apply.render("query.json", QUERY=query), **extra}
        if pipeline is None:
            body.pop("ext")
        path = f"/{SEMEVAL_INDEX}/_search" + (f"?search_pipeline={pipeline}" if pipeline else "")
        return cluster.call("POST", path + ("&verbose_pipeline=true" if verbose else ""), body)

    def scores(extra: dict) -> list[tuple[str, float]]:
        return [(h["_id"], h["_score"]) for h in answer(extra)["hits"]["hits"]]

    whole = scores({})
    first_stage = [(h["_id"], h["_score"]) for h in answer({}, pipeline=None)["hits"]["hits"]]
    assert whole and max(s for _, s in whole) > 0.0 and all(0.0 <= s <= 1.0 for _, s in whole)
    assert max(s for _, s in first_stage) > 1.0  # BM25: told apart from a probability at a glance
    for narrowed in ({"_source": ["title"]}, {"_source": False}):
        got = scores(narrowed)
        assert {s for _, s in got} != {0.0}, narrowed
        assert [i for i, _ in got] == [i for i, _ in first_stage], narrowed  # not reranked: the first
        assert [s for _, s in got] == pytest.approx([s for _, s in first_stage]), narrowed  # stage's answer
        results = answer(narrowed, verbose=True)["processor_results"]
        failed = [r for r in results if r.get("status") == "fail"]
        assert failed and "rerank_text" in str(failed[0].get("error")), results
    for kept in ({"_source": ["title", "rerank_text"]}, {"_source": False, "fields": ["rerank_text"]}):
        got = scores(kept)
        assert [i for i, _ in got] == [i for i, _ in whole], kept
        assert [s for _, s in got] == pytest.approx([s for _, s in whole], abs=1e-6), kept
