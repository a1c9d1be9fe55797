"""Modes ``vectors``, ``hybrid`` and ``hybrid-rrf`` on a real OpenSearch 2.19.1 node, through the CLI,
against their in-process rankers.

``es setup`` maps the vector as the k-NN plugin's ``knn_vector`` (lucene engine, ``cosinesimil``) beside
the BOW ``rank_features``; ``es index`` stores both, embedded through the live sidecar; ``es search``
sends the Elasticsearch modes' bodies in the k-NN plugin's terms (``es_plugin_bridge/elastic/
cluster/opensearch_dsl.py``). On SemEval-2016 dev (its 50 original questions) and on 1,200 lines of AskUbuntu
title pairs (25 duplicate queries, then all 110 other titles with shell or code in them: ``$PATH``,
``:a;$!N;``, backquotes, ``||``, quotes, braces, backslashes, ``->``), each mode's top 10 is its
in-process ranker's — ``fused``, ``hybrid``, ``hybrid-rrf``, window 50 — in the same order, and its
scores are that ranker's plus one constant per query (``vectors``, ``hybrid``) or the same
(``hybrid-rrf``, fused by this client). Nothing differs on this data; the one arithmetic difference,
Lucene's rank_features truncation (each stored BOW value keeps 9 significant bits), moves a score by
less than β_bow·2⁻⁸, which bounds the constant's spread here (docs/opensearch.md, "Stored vectors").

The OpenSearch rules these modes rest on, from the source (also cited where the code relies on them):
k-NN 2.19.1 ``plugin/script/knn_allowlist.txt`` and ``KNNScoringUtil.java`` (``cosineSimilarity`` and
``l1Norm`` take ``doc['vector']``), ``KNNVectorScriptDocValues.java`` (``size()`` 0 without a vector),
``index/query/KNNQueryFactory.java`` (the lucene engine's ``k``), ``engine/lucene/Lucene.java`` (its
spaces); OpenSearch ``search/SearchHit.java`` (named-query scores written only for the URL parameter
``include_named_queries_score``), ``search/fetch/subphase/MatchedQueriesPhase.java`` (the named query's
own score); neural-search has an RRF only for its ``hybrid`` query, so ``hybrid-rrf`` fuses in the client.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from es_commands import SEMEVAL_DEV, TITLES, TOKEN, common, ranking_differences, run
from live_sidecar import post
from recording_proxy import recording

from es_plugin_bridge.core.features import bow_features
from es_plugin_bridge.data.questions import question_from_text
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic.modes import mode_spec
from es_plugin_bridge.elastic.parity import in_process_ranker
from es_plugin_bridge.evaluation.retrieval import duplicate_queries
from es_plugin_bridge.rankers import RankerContext, TokenCache
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import rerank_text

pytestmark = [pytest.mark.engine, pytest.mark.slow]

WINDOW = 50
#: Each mode and the in-process ranker whose order it gives (the registry's ``ranker``; built by
#: ``elastic.parity.in_process_ranker``, as ``es evaluate``'s parity check builds it).
MODES = {mode: mode_spec(mode).ranker for mode in ("vectors", "hybrid", "hybrid-rrf")}
#: Characters of shell and code in titles: what a technical forum's queries look like.
MESSY = ("$", "`", "|", '"', "{", "\\", "->")
#: Lucene keeps 9 significant bits of a rank_features value (truncated): a BOW cosine moves < 2^-8.
TRUNCATION = 2.0**-8


@dataclass
class World:
    """One data set indexed on the node, its queries, and the in-process rankers over the same questions."""

    name: str
    index: str
    spec: str
    queries: list[str]
    rankers: dict
    beta_bow: float


def askubuntu_queries(spec: str) -> list[str]:
    """25 duplicate queries, then every other title with shell or code in it (a :data:`MESSY` character)."""
    dataset = read_spec(spec)
    found, _ = duplicate_queries(dataset.pairs)
    queries = [q.query.title for q in found[:25]]
    titles = [q.title for q in dataset.questions.values()]
    return queries + [t for t in titles if any(c in t for c in MESSY) and t not in queries]


@pytest.fixture(scope="module", params=["semeval", "askubuntu"])
def world(request, opensearch, sidecar, tmp_path_factory) -> World:
    """The data set set up and indexed through the CLI, and the in-process rankers over its questions."""
    url, model = sidecar
    if request.param == "semeval":
        spec = f"semeval:{SEMEVAL_DEV}"
        queries = [q.query.title for q in read_spec(spec).queries]
    else:
        path = tmp_path_factory.mktemp("titles") / "titles.tsv"
        lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[3000:4200]
        path.write_text("".join(lines), encoding="utf-8")
        spec = f"pairs:{path}"
        queries = askubuntu_queries(spec)
    index = f"vectors-{request.param}"
    assert run(["es", "setup", str(model), "--index", index, *common(opensearch, url)]) == 0
    assert run(["es", "index", spec, "--index", index, "--no-progress", *common(opensearch, url)]) == 0
    questions = list(read_spec(spec).questions.values())  # the order es index sends them in
    context = RankerContext(collection=questions, tokens=TokenCache(Preprocessor()), model_dir=model,
                            fused_first_stage="bm25")
    meta = opensearch.ok("GET", f"/{index}/_mapping")[index]["mappings"]["_meta"]["esrerank"]
    rankers = {mode: in_process_ranker(mode, context, WINDOW) for mode in MODES}
    return World(request.param, index, spec, queries, rankers, meta["fusion"]["bm25"]["bow"])


def search(cli, opensearch, url: str, index: str, text: str, mode: str, *extra: str) -> dict:
    """``es search --json`` of ``text`` (after ``--``: a title may start with a dash)."""
    code, out, err = cli(["es", "search", "--mode", mode, "--json", "--window", str(WINDOW), "--index", index,
                          *extra, *common(opensearch, url), "--", text])
    assert code == 0, (text, err)
    return json.loads(out)


@pytest.mark.parametrize("mode", list(MODES))
def test_each_mode_gives_its_in_process_rankers_top_10(world, opensearch, sidecar, cli, mode):
    url, _ = sidecar
    # vectors and hybrid: the ranker's score plus one constant, within the rank_features truncation;
    # hybrid-rrf: Σ 1/(60 + rank), computed by this client as in process
    spread = 1e-5 + world.beta_bow * TRUNCATION if mode != "hybrid-rrf" else 1e-12
    found = {}
    for text in world.queries:
        result = search(cli, opensearch, url, world.index, text, mode)
        assert result["reranked"] is True
        got = [(hit["id"], hit["score"]) for hit in result["hits"]]
        want = world.rankers[mode].search(question_from_text(text), WINDOW)  # its top 10 is the first 10
        assert len(got) == min(10, len(want))
        if diff := ranking_differences(got, want, spread):
            found[text] = diff
    assert found == {}, f"{len(found)} of {len(world.queries)} queries differ"


def test_hnsw_finds_the_exact_top_10_here(world, opensearch, sidecar, cli):
    """``--knn hnsw``: the lucene engine's HNSW with k = 10 × window candidates (Elasticsearch's
    num_candidates). Approximate in general; on these collections (550 and 2,197 questions) its window
    holds every exact neighbour that reaches the top 10."""
    url, _ = sidecar
    found = {}
    for text in world.queries[:20]:
        result = search(cli, opensearch, url, world.index, text, "hybrid", "--knn", "hnsw", "--explain")
        (_, first, _, dense) = result["request"]["msearch"]
        # Elasticsearch's top-level knn section, as the k-NN plugin's knn query: k = its num_candidates
        assert "knn" not in dense and dense["size"] == WINDOW
        assert dense["query"]["knn"]["vector"]["k"] == 10 * WINDOW
        got = [(hit["id"], hit["score"]) for hit in result["hits"]]
        want = world.rankers["hybrid"].search(question_from_text(text), WINDOW)
        if diff := ranking_differences(got, want, 1e-5 + world.beta_bow * TRUNCATION):
            found[text] = diff
    assert found == {}


def test_setup_maps_a_lucene_knn_vector_and_index_stores_what_the_sidecar_embeds(world, opensearch, sidecar):
    url, _ = sidecar
    mapping = opensearch.ok("GET", f"/{world.index}/_mapping")[world.index]["mappings"]
    vector = mapping["properties"]["vector"]
    dimension = mapping["_meta"]["esrerank"]["dimension"]
    assert vector == {"type": "knn_vector", "dimension": dimension,
                      "method": {"engine": "lucene", "space_type": "cosinesimil", "name": "hnsw",
                                 "parameters": {}}}
    assert mapping["properties"]["bow"] == {"type": "rank_features"}
    settings = opensearch.ok("GET", f"/{world.index}/_settings")[world.index]["settings"]["index"]
    assert settings["knn"] == "true" and settings["number_of_shards"] == "1"
    questions = list(read_spec(world.spec).questions.values())
    sample = questions[:: max(1, len(questions) // 12)]
    status, answer = post(f"{url}/v1/encode", {"texts": [rerank_text(q) for q in sample]}, TOKEN)
    assert status == 200, answer
    for question, embedding in zip(sample, answer["embeddings"], strict=True):
        stored = opensearch.ok("GET", f"/{world.index}/_doc/{question.id}")["_source"]
        assert stored["vector"] == pytest.approx(embedding["vector"], abs=1e-6)
        assert stored.get("bow", {}) == pytest.approx(bow_features(embedding["terms"]), abs=1e-9)
        assert stored["rerank_text"] == rerank_text(question)


def test_the_bodies_sent_are_the_k_nn_plugins(world, opensearch, sidecar, cli):
    """What ``--explain`` shows is what OpenSearch got: the k-NN plugin's Painless (the field's doc
    values, not its name) in the rescore and in the exact neighbours' window, and no retriever."""
    url, _ = sidecar
    text = world.queries[0]
    vectors = search(cli, opensearch, url, world.index, text, "vectors", "--explain")["request"]
    script = vectors["rescore"]["query"]["rescore_query"]["script_score"]["script"]["source"]
    assert "cosineSimilarity(params.q, doc['vector'])" in script and "'vector')" not in script
    assert set(vectors) == {"query", "rescore"}  # two calls: OpenSearch has no linear retriever
    hybrid = search(cli, opensearch, url, world.index, text, "hybrid", "--explain")["request"]
    dense = hybrid["msearch"][3]["query"]["script_score"]["script"]["source"]
    assert dense == "(doc['vector'].size() == 0 ? 1.0 : cosineSimilarity(params.q, doc['vector']) + 1.0)"
    assert hybrid["search"]["rescore"]["query"]["query_weight"] == 0.0
    rrf = search(cli, opensearch, url, world.index, text, "hybrid-rrf", "--explain")["request"]
    assert set(rrf) == {"msearch"}  # OpenSearch has no rrf retriever: this client fuses


def test_a_query_with_no_tokens_and_no_direction_answers_nothing(world, opensearch, sidecar, cli):
    """``??? !!!`` has no token and embeds to a zero vector, which no cosine can search (the k-NN
    plugin refuses it: ``SpaceType.COSINESIMIL.validateVector``): every mode answers no hit."""
    url, _ = sidecar
    for mode in MODES:
        assert search(cli, opensearch, url, world.index, "??? !!!", mode)["hits"] == []


@pytest.mark.parametrize(("mode", "task"), [("vectors", "rerank"), ("hybrid", "retrieval"),
                                            ("hybrid-rrf", "retrieval")])
def test_es_evaluate_gives_the_in_process_figures(opensearch, sidecar, cli, tmp_path, mode, task):
    """``es evaluate --mode M`` makes its own index with vectors on the node and reports the mode as its
    ranker: the in-process figures, to the last digit (SemEval dev reranked; AskUbuntu retrieval, each
    query's own question excluded)."""
    url, model = sidecar
    ranker = MODES[mode]
    if task == "rerank":
        data = ["--data", f"semeval:{SEMEVAL_DEV}"]
    else:
        path = tmp_path / "titles.tsv"
        path.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[3000:4200]),
                        encoding="utf-8")
        # the 2,400 questions are the collection; 300 of them are asked (the same subset both ways)
        data = ["--queries", f"pairs:{path}", "--max-queries", "300"]
    base = ["--task", task, *data, "--model", str(model), "--no-progress"]
    code, _, err = cli(["evaluate", *base, "--rankers", f"bm25,{ranker}", "--first-stage", "bm25",
                        "--param", f"{ranker}.window={WINDOW}", "--json", str(tmp_path / "local.json")])
    assert code == 0, err
    # hybrid's and hybrid-rrf's ranker is not fused: fused asked for too is computed here, and said so
    also = [] if ranker == "fused" else ["fused"]
    code, out, err = cli(["es", "evaluate", *base, "--rankers", ",".join(["bm25", ranker, *also]),
                          "--mode", mode, "--window", str(WINDOW), "--no-results-index",
                          "--json", str(tmp_path / "os.json"), *common(opensearch, url)])
    assert code == 0, err
    local = json.loads((tmp_path / "local.json").read_text())["rankers"]
    answer = json.loads((tmp_path / "os.json").read_text())
    remote = answer["rankers"]
    for name in ("bm25", ranker):
        assert {k: round(v, 6) for k, v in remote[name].items()} == \
               {k: round(v, 6) for k, v in local[name].items()}, name
    assert f"{ranker} = mode {mode} over bm25" in out
    assert answer["computed_by"] == {"bm25": "engine", ranker: "engine", **dict.fromkeys(also, "in process")}
    # the table labels it "fused (in process)" (wrapped in a narrow terminal); the note says it whole
    assert ("computed in process, not by the cluster: fused" in out) == bool(also)
    assert not [i for i in opensearch.ok("GET", "/_cat/indices?format=json")
                if i["index"].startswith("esrerank-eval-")]  # the run's index is gone with it


def test_the_askubuntu_queries_hold_shell_and_code(tmp_path):
    path = tmp_path / "titles.tsv"
    path.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[3000:4200]),
                    encoding="utf-8")
    queries = askubuntu_queries(f"pairs:{path}")
    assert all(any(char in q for q in queries) for char in MESSY)
    assert len(set(queries)) == len(queries) and sum(any(c in q for c in MESSY) for q in queries) >= 100
    assert "ADT Bundle .bashrc $PATH not working" in queries
    assert "What is the meaning of :a;$!N; in a sed command?" in queries


def test_es_search_hybrid_sends_five_requests_and_one_get_root(world, opensearch, sidecar, cli):
    """``es search --mode hybrid`` with titles shown: ``GET /`` once (the engine and its version read
    together), the index's mapping, the two windows in one ``_msearch``, the union's ``_search``, and the
    shown top 10's titles in one ``_mget`` — what a proxy in front of the node saw. (The union's own
    ``_source`` would carry up to twice the window's titles and bodies to show ten titles.)"""
    url, _ = sidecar
    with recording(opensearch.url) as proxy:
        code, out, err = cli(["es", "search", "--mode", "hybrid", "--window", str(WINDOW), "--index",
                              world.index, "--es-url", proxy.url, "--sidecar", url, "--token", TOKEN,
                              "--", world.queries[0]])
    assert code == 0, err
    sent = proxy.requests
    assert sent.count(("GET", "/")) == 1, sent
    assert len(sent) <= 5 and [path for _, path in sent].count(f"/{world.index}/_mget") <= 1, sent
    assert len([line for line in out.splitlines() if line.strip()]) >= 10  # the titles were printed
