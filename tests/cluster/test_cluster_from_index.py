"""``es setup --from-index`` on a user's index of 5 shards and 1 replica spread over the three nodes: the
copy (into 3 shards × 1 replica) and ``--in-place`` (their 5 shards, which an index keeps for life:
``number_of_shards`` is fixed at creation) rank alike in every mode, as on one shard
(``tests/opensearch/test_opensearch_from_index.py`` shows the single-node version and why: the same text
under their analyzer, the same BM25, the same vectors). Here it also needs global statistics: their 5
shards and the copy's 3 split the same questions differently, so per-shard statistics would differ
between the two.
"""

from __future__ import annotations

import json

import pytest
from es_commands import run
from shard_checks import (
    askubuntu_questions,
    bow_cnn_sidecar,
    connection,
    first_stage_ties,
    hits,
    same_ranking,
    search,
    shard_copies,
)

from es_plugin_bridge.data.types import Question

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.slow]

THEIRS = "forum-5-shards"
COPY = "forum-5-shards-reranked"
FIELDS = ["--from-index", THEIRS, "--title-field", "question.title", "--body-field", "question.text"]
MODES = ("learned-hybrid", "vectors", "hybrid", "hybrid-rrf", "rerank", "bridge")


@pytest.fixture(scope="module")
def sidecar(exported, tmp_path_factory):
    with bow_cnn_sidecar(exported, tmp_path_factory.mktemp("token")) as found:
        yield found


@pytest.fixture(scope="module")
def questions() -> list[Question]:
    return askubuntu_questions(400)


@pytest.fixture(scope="module")
def forum(opensearch_cluster, sidecar, questions) -> dict[str, str]:
    """Their index (5 shards, 1 replica, English stemming, their own field names), then ``es setup``
    copying it into 3 shards and extending it in place; their ``_id`` → ``qid``."""
    url, model = sidecar
    node = opensearch_cluster.nodes[0]
    node.ok("PUT", f"/{THEIRS}", {
        "settings": {"number_of_shards": 5, "number_of_replicas": 1,
                     "analysis": {"analyzer": {"forum_en": {"type": "english"}}}},
        "mappings": {"properties": {
            "question": {"properties": {"title": {"type": "text", "analyzer": "forum_en"},
                                        "text": {"type": "text", "analyzer": "forum_en"}}},
            "qid": {"type": "keyword"}}}})
    lines = []
    for i, q in enumerate(questions):
        lines += [{"index": {"_index": THEIRS, "_id": f"doc-{i}"}},
                  {"question": {"title": q.title, "text": q.body}, "qid": q.id}]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    answer = node.ok("POST", "/_bulk?refresh=true", body)
    assert not answer["errors"]
    common = connection(opensearch_cluster, url)
    assert run(["es", "setup", str(model), "--index", COPY, *FIELDS, "--id-field", "qid", "--shards", "3",
                "--replicas", "1", "--no-progress", *common]) == 0
    assert run(["es", "setup", str(model), *FIELDS, "--in-place", "--no-progress", *common]) == 0
    node.ok("GET", "/_cluster/health?wait_for_status=green&timeout=120s")
    return {f"doc-{i}": q.id for i, q in enumerate(questions)}


def test_their_five_shards_and_the_copys_three_hold_every_question(forum, opensearch_cluster, questions):
    node = opensearch_cluster.nodes[0]
    assert sum(len(held) for held in shard_copies(opensearch_cluster, THEIRS).values()) == 10
    assert sum(len(held) for held in shard_copies(opensearch_cluster, COPY).values()) == 6
    for index in (THEIRS, COPY):
        assert node.ok("GET", f"/{index}/_count")["count"] == len(questions)
    with_vectors = {"query": {"exists": {"field": "vector"}}}
    assert node.ok("POST", f"/{THEIRS}/_count", with_vectors)["count"] == len(questions)


def test_shards_are_refused_in_one_line_in_place(forum, opensearch_cluster, sidecar, cli):
    url, model = sidecar
    code, out, err = cli(["es", "setup", str(model), *FIELDS, "--in-place", "--shards", "3",
                          *connection(opensearch_cluster, url)])
    assert code != 0 and out == "" and "Traceback" not in err
    assert err.strip() == ("error: --shards and --replicas shape a new index; with --in-place your index "
                           "keeps its own (OpenSearch fixes number_of_shards when an index is created)")


@pytest.mark.parametrize("mode", MODES)
def test_the_copy_and_their_five_shards_in_place_rank_alike(forum, opensearch_cluster, sidecar, questions,
                                                             cli, mode):
    url, _ = sidecar
    differ = {}
    for text in [q.title for q in questions[::40]]:  # 10 queries, shell snippets among them
        copy = hits(search(cli, opensearch_cluster, url, COPY, text, mode, 100))
        in_place = [(forum[doc], score)
                    for doc, score in hits(search(cli, opensearch_cluster, url, THEIRS, text, mode, 100))]
        assert copy, text
        if not same_ranking(in_place, copy):
            if mode == "hybrid-rrf" and first_stage_ties(opensearch_cluster, COPY, text, 100):
                continue  # equal scores ranked in the engine's order (shard_checks.first_stage_ties)
            differ[text] = (in_place, copy)
    assert differ == {}
