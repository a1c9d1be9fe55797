"""The first stage alone on 3 shards × 1 replica over the three nodes scores as the embedded engine does,
for all six similarities — because the product asks for global statistics.

Each shard scores BM25, LM-Dirichlet, LM-Jelinek-Mercer, DFR, IB and the scripted TF-IDF with its own
document frequencies and lengths; ``search_type=dfs_query_then_fetch`` makes every shard score with the
sums over all of them (OpenSearch ``search/dfs/DfsPhase.java``,
``search/internal/ContextIndexSearcher.java``), which is what the product's first stage sends
(``elastic/cluster/shards.py``). The collections are the single-node test's
(``tests/opensearch/test_opensearch_first_stage.py``): SemEval-2016 dev (rerank: each query's ten
candidates, a candidate sharing no token scored 0) and 1,000 AskUbuntu pairs with their HTML bodies,
shell and code snippets (retrieval: the top 10 of the whole collection, the query excluded). Asked for
each shard's own statistics (``es search --shard-statistics``), the same searches do differ: the shards
of this small data really hold different statistics, so the equality is the product's doing.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from es_commands import SEMEVAL_DEV
from shard_checks import ASKUBUNTU_VAL, same_ranking, shard_copies

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.cluster.opensearch_client import connect
from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
from es_plugin_bridge.engines.embedded import EmbeddedEngine
from es_plugin_bridge.engines.similarities import SIMILARITIES, make_similarity
from es_plugin_bridge.rankers.base import unique_questions
from es_plugin_bridge.text import Preprocessor

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.slow]

#: Lucene scores in float, the embedded engine in double: 1e-5 relative is a few float ulps.
REL = 1e-5
N_QUERIES = 30


def engine_scale(similarity: str) -> float:
    """OpenSearch's BM25 is ``LegacyBM25Similarity``: Lucene's times k1 + 1 (the single-node test says
    why)."""
    return 1.0 + make_similarity("bm25").params["k1"] if similarity == "bm25" else 1.0


class Sharded:
    """One data set in an index of 3 shards and 1 replica on the cluster, and in the embedded engine."""

    def __init__(self, cluster, name: str, questions, tokens) -> None:
        self.index, self.tokens = name, tokens
        node = cluster.nodes[0]
        node.ok("PUT", f"/{name}", mappings.index_body(shards=3, replicas=1))
        lines = []
        for q in questions:
            lines += [json.dumps({"index": {"_id": q.id}}),
                      json.dumps(mappings.document(q, tokens(q)), ensure_ascii=False)]
        answer = node.ok("POST", f"/{name}/_bulk?refresh=true", ("\n".join(lines) + "\n").encode())
        assert not answer["errors"]
        node.ok("GET", f"/_cluster/health/{name}?wait_for_status=green&timeout=120s")
        self.client = connect(node.url)
        self.embedded = EmbeddedEngine(tokens)
        self.embedded.index(questions)

    def stage(self, similarity: str, global_statistics: bool = True) -> ElasticsearchFirstStage:
        return ElasticsearchFirstStage(self.client, self.index, similarity, self.tokens,
                                       global_statistics=global_statistics)


@pytest.fixture(scope="module")
def tokens():
    return Preprocessor().tokens


@pytest.fixture(scope="module")
def semeval(opensearch_cluster, tokens):
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries
    questions = unique_questions([q.candidates for q in queries])
    return Sharded(opensearch_cluster, "sharded-first-stage-semeval", questions, tokens), queries


@pytest.fixture(scope="module")
def askubuntu(opensearch_cluster, tokens):
    pairs = read_spec(f"pairs:{ASKUBUNTU_VAL}").pairs
    questions = unique_questions([[p.q1, p.q2] for p in pairs])
    messy = sorted(questions, key=lambda q: ("${" not in q.body, "\\" not in q.body, "<code>" not in q.body))
    return Sharded(opensearch_cluster, "sharded-first-stage-askubuntu", questions, tokens), messy[:N_QUERIES]


def test_the_index_has_three_shards_and_their_replicas_on_other_nodes(opensearch_cluster, askubuntu):
    collection, _ = askubuntu
    copies = shard_copies(opensearch_cluster, collection.index)
    assert sorted(c for held in copies.values() for c in held) == ["0p", "0r", "1p", "1r", "2p", "2r"]
    for shard in "012":  # a primary and its replica never share a node (SameShardAllocationDecider)
        assert sum(f"{shard}p" in held or f"{shard}r" in held for held in copies.values()) == 2
    assert len(copies) == 3  # and the six copies are spread over all three nodes
    # every shard holds part of the questions: each primary's count (a replica's ``docs`` in _cat/shards
    # can be null while its node has not reported its stats, found on this machine after green)
    counts = opensearch_cluster.nodes[0].ok("GET", f"/_cat/shards/{collection.index}?format=json")
    primaries = [row for row in counts if row["prirep"] == "p"]
    assert len(primaries) == 3 and all(int(row["docs"]) > 100 for row in primaries), counts
    assert all(row["docs"] is None or int(row["docs"]) > 100 for row in counts), counts


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_each_similarity_scores_as_the_embedded_engine_on_three_shards(semeval, askubuntu, similarity):
    collection, queries = semeval
    stage, local_stage = collection.stage(similarity), collection.embedded.first_stage(similarity)
    for query in queries:  # rerank: every candidate's score
        ids = [c.id for c in query.candidates]
        local = local_stage.score(query.query, ids) * engine_scale(similarity)
        np.testing.assert_allclose(stage.score(query.query, ids), local, rtol=REL, atol=1e-6,
                                   err_msg=f"{similarity} {query.query.id}")
    collection, queries = askubuntu
    stage, local_stage = collection.stage(similarity), collection.embedded.first_stage(similarity)
    for query in queries:  # retrieval: the global top 10
        remote = stage.search(query, 10, exclude={query.id})
        found = local_stage.search(query, 10, exclude={query.id})
        local = [(i, s * engine_scale(similarity)) for i, s in found]
        assert query.id not in dict(remote)
        tolerance = REL * max((abs(s) for _, s in local), default=0.0) + 1e-6
        assert same_ranking(remote, local, atol=tolerance), (similarity, query.id, remote, local)


@pytest.mark.parametrize("similarity", ["bm25", "lmdirichlet"])
def test_per_shard_statistics_would_score_otherwise(askubuntu, similarity):
    """What ``--shard-statistics`` gives up: on these 3 shards most queries' scores move."""
    collection, queries = askubuntu
    stage = collection.stage(similarity, global_statistics=False)
    local_stage = collection.embedded.first_stage(similarity)
    moved = 0
    for query in queries:
        remote = dict(stage.search(query, 10, exclude={query.id}))
        local = dict(local_stage.search(query, 10, exclude={query.id}))
        common = set(remote) & set(local)
        moved += any(abs(remote[i] - local[i] * engine_scale(similarity)) > 1e-4 * abs(remote[i])
                     for i in common) or set(remote) != set(local)
    assert moved >= len(queries) // 2, f"{moved} of {len(queries)}"
