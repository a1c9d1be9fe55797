"""Every OpenSearch mode exact on 3 shards × 1 replica over three nodes: ``es setup --shards 3 --replicas
1``, ``es index``, ``es search`` — the same top 10 and scores as the mode's in-process ranker (which the
single-node tests show a single-shard index gives too), on SemEval-2016 dev (550 questions, 30 of its
50 queries) and on 500 AskUbuntu questions with their HTML bodies (shell and code in them; 30 of their
titles as queries).

Why each holds (``es_plugin_bridge/elastic/cluster/shards.py`` cites the engine's source):

- every search asks for global statistics (``dfs_query_then_fetch``), so each shard scores the first
  stage as one shard would;
- ``learned-hybrid`` (the default) on several shards sends its two clauses' windows in one ``_msearch``
  and fuses them on the client with its fitted normalisation, combination and weights, so its top ten
  is the in-process ranker's;
- ``bridge`` reranks the merged top window on the client; ``rerank``'s response processor sees the
  merged page; ``hybrid``'s windows are merged tops (its exact neighbours a ``script_score``), and its
  second search is restricted to the union, so the per-shard rescore window holds all of it;
- ``vectors`` (two calls on OpenSearch) rescored each shard's own top window before: up to 3 × window
  documents on 3 shards, some outside the global window. Its second call now carries the ids of the
  global window the first call read (the test of ``--explain`` below), so exactly those are rescored.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from es_commands import SEMEVAL_DEV, TOKEN, ranking_differences, run
from live_sidecar import post
from shard_checks import (
    ASKUBUNTU_VAL,
    bow_cnn_sidecar,
    connection,
    first_stage_ties,
    hits,
    same_ranking,
    search,
    shard_copies,
)

from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic.modes import mode_names
from es_plugin_bridge.rankers import RankerContext, TokenCache, build
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import rerank_text

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.slow]

WINDOW = 50
#: Each mode and the in-process ranker whose order it gives (``rerank``: the model's order of the
#: in-process BM25 window, asked of the sidecar).
MODES = {"learned-hybrid": "learned-hybrid", "bridge": "fused", "vectors": "fused", "hybrid": "hybrid",
         "hybrid-rrf": "hybrid-rrf", "rerank": "bm25"}
#: The modes whose answer depends on the order of equal first-stage scores, not only on the scores:
#: hybrid-rrf fuses ranks, and rerank's window ends at a rank (a tie across its edge).
RANKED = ("hybrid-rrf", "rerank")
#: The share of queries whose difference may be such a tie.
TIED_AT_MOST = {"hybrid-rrf": 0.5, "rerank": 0.2}  # SemEval: 14 of 30 queries tie in hybrid-rrf
#: Lines of AskUbuntu's val.tsv indexed: some 500 questions with their bodies.
PAIRS = 260
#: Lucene keeps 9 significant bits of a rank_features value: a BOW cosine moves < 2^-8.
TRUNCATION = 2.0**-8


def test_every_mode_opensearch_runs_is_compared_here():
    assert set(MODES) == set(mode_names("opensearch"))


@dataclass
class World:
    name: str
    spec: str
    queries: list[str]
    rankers: dict
    beta_bow: float

    @property
    def sharded(self) -> str:
        return f"sharded-{self.name}"


@pytest.fixture(scope="module")
def sidecar(exported, tmp_path_factory):
    with bow_cnn_sidecar(exported, tmp_path_factory.mktemp("token")) as found:
        yield found


@pytest.fixture(scope="module", params=["semeval", "askubuntu"])
def world(request, opensearch_cluster, sidecar, tmp_path_factory) -> World:
    """The data set set up and indexed through the CLI (3 shards × 1 replica), and the in-process rankers
    over its questions."""
    url, model = sidecar
    if request.param == "semeval":
        spec = f"semeval:{SEMEVAL_DEV}"
        queries = [q.query.title for q in read_spec(spec).queries][:30]  # of its 50: the CI budget
    else:
        path = tmp_path_factory.mktemp("askubuntu") / "val.tsv"
        path.write_text("".join(ASKUBUNTU_VAL.read_text(encoding="utf-8").splitlines(keepends=True)[:PAIRS]),
                        encoding="utf-8")
        spec = f"pairs:{path}"
        queries = [q.title for q in list(read_spec(spec).questions.values())[::17]][:30]
    name = request.param
    common = connection(opensearch_cluster, url)
    index = f"sharded-{name}"
    layout = ["--shards", "3", "--replicas", "1"]
    assert run(["es", "setup", str(model), "--index", index, *layout, *common]) == 0
    assert run(["es", "index", spec, "--index", index, "--no-progress", *common]) == 0
    opensearch_cluster.nodes[0].ok("GET", "/_cluster/health?wait_for_status=green&timeout=120s")
    collection = list(read_spec(spec).questions.values())
    params = {ranker: {"window": WINDOW} for ranker in ("fused", "hybrid", "hybrid-rrf")}
    context = RankerContext(collection=collection, tokens=TokenCache(Preprocessor()), model_dir=model,
                            fused_first_stage="bm25", params=params)
    meta = opensearch_cluster.nodes[0].ok("GET", f"/sharded-{name}/_mapping")[f"sharded-{name}"]
    beta_bow = meta["mappings"]["_meta"]["esrerank"]["fusion"]["bm25"]["bow"]
    return World(name, spec, queries, {r: build(r, context) for r in set(MODES.values())}, beta_bow)


def test_setup_spreads_three_shards_and_their_replicas_over_three_nodes(world, opensearch_cluster, sidecar,
                                                                        cli):
    url, model = sidecar
    copies = shard_copies(opensearch_cluster, world.sharded)
    assert sorted(c for held in copies.values() for c in held) == ["0p", "0r", "1p", "1r", "2p", "2r"]
    assert len(copies) == 3  # over all three nodes; a primary and its replica never share one
    code, out, err = cli(["es", "setup", str(model), "--index", f"said-{world.name}", "--shards", "2",
                          "--replicas", "0", *connection(opensearch_cluster, url)])
    assert code == 0, err
    assert f"created index said-{world.name} (2 shards, 0 replicas)" in out
    code, out, err = cli(["es", "setup", str(model), "--index", f"default-{world.name}",
                          *connection(opensearch_cluster, url)])
    assert code == 0, err
    index = f"default-{world.name}"
    settings = opensearch_cluster.nodes[0].ok("GET", f"/{index}/_settings")[index]
    assert settings["settings"]["index"]["number_of_shards"] == "1"  # the default stays one shard


def _rerank_expected(world: World, url: str, text: str) -> list[tuple[str, float]]:
    """The sidecar's order of the in-process BM25 window (what mode rerank promises), top 10."""
    window = world.rankers["bm25"].search(question_from_text(text), WINDOW)
    by_id = {q.id: q for q in read_spec(world.spec).questions.values()}
    status, answer = post(f"{url}/v1/rerank", {
        "query": rerank_text(question_from_text(text)),
        "documents": [rerank_text(by_id[doc]) for doc, _ in window]}, TOKEN)
    assert status == 200, answer
    return [(window[r["index"]][0], r["relevance_score"]) for r in answer["results"]][:10]


def vector_ties(ranker, text: str, window: int) -> bool:
    """Whether two documents of the vectors' exact top ``window`` have the same similarity (the same
    vector: duplicate titles). As for the first stage (``shard_checks.first_stage_ties``), the engine
    orders such ties by shard, in process by collection order, and ``hybrid-rrf`` fuses their ranks."""
    scores = [s for _, s in ranker.dense.search(question_from_text(text), window)]
    return any(abs(a - b) <= 1e-6 for a, b in zip(scores, scores[1:], strict=False))


@pytest.mark.parametrize("mode", list(MODES))
def test_each_mode_on_three_shards_equals_its_in_process_ranker(world, opensearch_cluster,
                                                                             sidecar, cli, mode):
    url, _ = sidecar
    spread = 1e-12 if mode == "hybrid-rrf" else 1e-5 + world.beta_bow * TRUNCATION
    differ, tied = {}, 0
    for text in world.queries:
        sharded = search(cli, opensearch_cluster, url, world.sharded, text, mode, WINDOW)
        assert sharded["reranked"] is True, sharded
        got = hits(sharded)
        if mode == "rerank":
            expected = _rerank_expected(world, url, text)
            found = None if same_ranking(got, expected, atol=1e-6) else ("in process", got, expected)
        else:
            want = world.rankers[MODES[mode]].search(question_from_text(text), WINDOW)
            # bridge answers the sidecar's score of the fused order (its own scale): the order is compared
            diff = ranking_differences(got, want, spread, scores=mode != "bridge")
            found = ("in process", diff) if diff else None
        if found is None:
            continue
        if mode in RANKED and first_stage_ties(opensearch_cluster, world.sharded, text, WINDOW):
            tied += 1  # equal first-stage scores in the engine's order (shard_checks.first_stage_ties)
            continue
        if mode == "hybrid-rrf" and vector_ties(world.rankers[MODES[mode]], text, WINDOW):
            tied += 1  # the same rule for the vectors' window: equal similarities, shard order
            continue
        differ[text] = found
    assert differ == {}, f"{len(differ)} of {len(world.queries)} queries differ: {next(iter(differ.items()))}"
    # most queries are compared whole (SemEval's short titles tie often: 16 of its 50 for hybrid-rrf)
    assert tied <= TIED_AT_MOST.get(mode, 0.0) * len(world.queries), tied


def test_vectors_rescores_exactly_the_global_first_stage_window(world, opensearch_cluster, sidecar, cli):
    """``--explain``: the rescored search holds the ids of the global top window (the in-process
    BM25 top 50), so no shard rescores a document outside it.

    Where documents score exactly what the window's last one scores, which of them are inside is the
    engine's order of equal scores: by shard, then by Lucene doc id within a shard
    (``SearchPhaseController`` merges by score, then shard index), and a replica's doc ids are its own,
    so two copies may keep different ones (SemEval dev's "Good Bank": Q309_R1 or Q286_R8 at rank 50).
    Every id above that score must be there, and any other only at that score."""
    url, _ = sidecar
    for text in world.queries[:10]:
        request = search(cli, opensearch_cluster, url, world.sharded, text, "vectors", WINDOW,
                         "--explain")["request"]
        (ids_filter,) = request["query"]["bool"]["filter"]
        scored = dict(world.rankers["bm25"].search(question_from_text(text), 2 * WINDOW))
        window = list(scored)[:WINDOW]
        edge = scored[window[-1]]
        at_edge = {doc for doc, score in scored.items() if abs(score - edge) <= 1e-6 * max(abs(edge), 1.0)}
        got = set(ids_filter["ids"]["values"])
        assert len(got) == len(window), text
        assert set(window) - at_edge <= got, text  # everything above the edge's score
        assert got - set(window) <= at_edge, (text, got - set(window), edge)  # the rest tie with the edge
        assert request["rescore"]["window_size"] == WINDOW
