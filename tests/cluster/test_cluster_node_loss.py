"""A node lost, nothing lost — the product on the three-node cluster (issue 35, item 3), shortened for
``make test`` (the full run, 20,000+ questions and two minutes of load per mode: ``benchmarks/node_loss.py``).

*During ``es index``* of 2,000 real AskUbuntu questions (1,804 with their HTML bodies, shell and code in
them) into an index of one replica, ``kill -9`` of one node once 200 are stored:

- the data node the run talks to (``--es-url`` its URL alone): the run stops, prints its report and the
  resume command; once the node is back and the cluster green, that command stores the rest;
- the elected cluster manager, with ``--es-url`` naming all three nodes (comma-separated): the client
  retries each request the dead node did not answer on another node (opensearch-py's ``Transport``
  marks it dead and retries, ``transport.py``), and a bulk item whose primary was on the dead node waits
  for the replica's promotion (``TransportReplicationAction.ReroutePhase`` retries until the bulk's
  ``timeout``, 1 minute), so the run completes by itself, exit 0.

Either way every question is there exactly once (its id is the document's ``_id``), with the vector and
terms the sidecar answers for it. While the node is down, and once it is back, the engine's own
guarantees hold as well (``engine_failover``: counts, yellow never red, a new manager, the same top 10s,
a write acknowledged; the rejoined node whole).

*During a search load* of two clients per mode (``rerank``, ``learned-hybrid``, ``bridge``, ``vectors``,
``hybrid``, ``hybrid-rrf``: twelve threads), ``kill -9`` of the elected cluster manager: every search ends
within its deadline, every failure is one line (the product's ``UserError``), and every answer equals the
healthy cluster's (a fallback: the first stage's top 10). A search needs one active copy of every shard and
the coordinating node moves to the next copy of a shard when one fails (``AbstractSearchAsyncAction``
``onShardFailure``/``performPhaseOnShard``); the client moves to another node when its node is gone.
The node restarts, rejoins, and the cluster is green again.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import time

import engine_failover as failover
import pytest
from es_commands import TOKEN, assert_stored_as_embedded, embeddings, run, sources
from live_sidecar import serve
from node_loss_load import (
    MODES,
    askubuntu_questions,
    first_stage_answers,
    healthy_answers,
    open_searcher,
    search_load,
    search_once,
    start_indexing,
    stray_answers,
    write_jsonl,
)
from recording_proxy import recording

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.opensearch_node import cluster as cluster_nodes
from es_plugin_bridge.opensearch_node import node

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.slow]

QUESTIONS = 2000
LOAD_QUESTIONS = 1000
#: ``--es-timeout`` and ``--timeout`` (the sidecar's) of the load's searches.
ES_TIMEOUT_S = 10.0
#: Seconds a search may take, whatever happens to the cluster: a few engine calls of ``--es-timeout``
#: and a sidecar call of ``--timeout``; a search that hangs past it fails the test.
DEADLINE_S = 60.0
#: ``es setup`` errors from ml-commons' first write on a fresh cluster, gone on a second try: the master key
#: not fetched in time (``EncryptorImpl.waitForLatch`` waits 3 s; a loaded machine takes longer). A model
#: left PARTIALLY_DEPLOYED is no error: ``opensearch_ml.wait_deployed`` deploys it again itself.
RETRIED = ("Fetching master key timed out",)


@pytest.fixture(scope="module")
def sidecar(exported, tmp_path_factory):
    """A live sidecar serving the tiny BOW-CNN with ``es_commands.TOKEN``: (URL, model directory)."""
    with serve(exported["bow-cnn"], TOKEN, tmp_path_factory.mktemp("token")) as url:
        yield url, exported["bow-cnn"]


def all_urls(cluster) -> str:
    """``--es-url`` naming every node of the cluster (comma-separated: the client fails over)."""
    return ",".join(cluster.urls)


def setup(cluster, sidecar_url: str, model, index: str) -> None:
    """``es setup`` of ``index`` on the cluster with one replica (every shard on two nodes): with
    ``--shards 3 --replicas 1`` where ``es setup`` takes them, else its single shard given a replica
    (``number_of_replicas`` is a dynamic setting). Once more after one of :data:`RETRIED`."""
    shards = ["--shards", "3", "--replicas", "1"] if _setup_takes_shards() else []
    argv = ["es", "setup", str(model), "--index", index, *shards, "--recreate", "--es-url", all_urls(cluster),
            "--sidecar", sidecar_url, "--token", TOKEN]
    for _ in range(3):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = run(argv)
        if code == 0 or not any(cause in err.getvalue() for cause in RETRIED):
            break
    assert code == 0, err.getvalue()
    if not shards:
        cluster.nodes[0].ok("PUT", f"/{index}/_settings", {"index": {"number_of_replicas": 1}})
    cluster.nodes[0].ok("GET", f"/_cluster/health/{index}?wait_for_status=green&timeout=120s")


def _setup_takes_shards() -> bool:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run(["es", "setup", "--help"])
    return "--shards" in out.getvalue()


def manager_index(cluster) -> int:
    """The node index of the elected cluster manager."""
    answer = cluster.nodes[0].ok("GET", "/_cluster/state/cluster_manager_node,nodes")
    return int(answer["nodes"][answer["cluster_manager_node"]]["name"].rsplit("-", 1)[1])


def victim_index(cluster, which: str) -> int:
    manager = manager_index(cluster)
    return manager if which == "elected cluster manager" else next(i for i in range(3) if i != manager)


def stored_count(node, index: str) -> int:
    node.ok("POST", f"/{index}/_refresh")
    return int(node.ok("GET", f"/{index}/_count")["count"])


def rejoin(cluster, killed: int) -> dict:
    """Restart node ``killed`` on its data and ports; the cluster's health once it is in and green."""
    cluster_nodes.restart_node(cluster.home, cluster.root, killed)
    survivor = cluster.nodes[(killed + 1) % 3]
    health = cluster_nodes.wait_for_nodes(survivor.url, 3, timeout=240)
    # its HTTP port opens only after it joined the cluster (``Node.start``: discovery, then HTTP)
    node.wait_ready(cluster.nodes[killed].url, timeout=120)
    return health


def resume_argv(out: str) -> list[str]:
    """The printed ``resume with:`` command as argv after ``esrerank`` (the token from the environment)."""
    (line,) = [line for line in out.splitlines() if line.startswith("resume with: ")]
    words = shlex.split(os.path.expandvars(line.removeprefix("resume with: ")))
    assert words[:3] == ["esrerank", "es", "index"] and words[-1] == "--resume"
    return words[1:]


@pytest.mark.parametrize(("which", "urls"), [("data node", "its own URL"),
                                             ("elected cluster manager", "every node's URL")])
def test_a_node_killed_during_es_index_loses_no_question(opensearch_cluster, sidecar, engine_index, tmp_path,
                                                         monkeypatch, which, urls):
    url, model = sidecar
    index = f"loss-index-{which.split()[-1]}"
    setup(opensearch_cluster, url, model, index)
    questions = askubuntu_questions(QUESTIONS)
    spec = write_jsonl(questions, tmp_path / "askubuntu.jsonl")
    killed = victim_index(opensearch_cluster, which)
    survivor = opensearch_cluster.nodes[(killed + 1) % 3]
    es_url = opensearch_cluster.nodes[killed].url if urls == "its own URL" else all_urls(opensearch_cluster)
    before = failover.top10s(opensearch_cluster.nodes[killed], engine_index)
    process = start_indexing(spec, index, es_url, url, TOKEN, "--batch-size", "20", "--max-retries", "1")
    try:
        deadline = time.monotonic() + 180
        while process.poll() is None and stored_count(survivor, index) < 200:
            assert time.monotonic() < deadline, f"{index} never held 200 documents"
            time.sleep(0.1)
        assert process.poll() is None, "the run ended before the fault"
        cluster_nodes.kill_node(opensearch_cluster.root, killed)
        out, err = process.communicate(timeout=300)
        failover.check_while_down(opensearch_cluster, killed, which, before)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if len(cluster_nodes.running_nodes(opensearch_cluster.root)) < 3:
            health = rejoin(opensearch_cluster, killed)
    assert health["status"] == "green"
    failover.check_after_rejoin(opensearch_cluster, killed, which, before)
    assert "Traceback" not in err
    if urls == "every node's URL":
        # the client failed over to the nodes left: the run finished by itself
        assert process.returncode == 0, err
        assert f"read {QUESTIONS}  indexed {QUESTIONS}  skipped 0  failed 0" in out
    else:
        # its only node gone, the run stops with its report and the command that resumes it
        assert process.returncode == 1, err
        assert err.strip().splitlines()[-1].startswith("error: ")
        monkeypatch.setenv("ESRERANK_TOKEN", TOKEN)
        with contextlib.redirect_stdout(io.StringIO()) as resumed:
            assert run(resume_argv(out)) == 0
        assert "skipped 0" not in resumed.getvalue()  # it skipped what the first run stored
    assert stored_count(survivor, index) == QUESTIONS  # each once: the question's id is the _id
    stored = sources(survivor, index)
    assert set(stored) == {q.id for q in questions}
    wanted = embeddings(url, questions)
    for question in questions:
        assert_stored_as_embedded(stored[question.id], wanted[question.id], question)


@pytest.fixture(scope="module")
def engine_index(opensearch_cluster) -> list:
    """``engine_failover``'s 2,000 AskUbuntu titles, written with the engine's bulk API."""
    return failover.build_index(opensearch_cluster)


@pytest.fixture(scope="module")
def load_index(opensearch_cluster, sidecar, tmp_path_factory):
    """1,000 AskUbuntu questions in an index with one replica; the load's queries: titles of other
    AskUbuntu questions (their duplicates' and neighbours', not in the index)."""
    url, model = sidecar
    index = "loss-search"
    setup(opensearch_cluster, url, model, index)
    questions = askubuntu_questions(LOAD_QUESTIONS + 30)
    spec = write_jsonl(questions[:LOAD_QUESTIONS], tmp_path_factory.mktemp("load") / "askubuntu.jsonl")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = run(["es", "index", spec, "--index", index, "--no-progress", "--es-url",
                    all_urls(opensearch_cluster), "--sidecar", url, "--token", TOKEN])
    assert code == 0, err.getvalue()
    return index, [q.title for q in questions[LOAD_QUESTIONS:]]


def test_searches_in_every_mode_fail_over_when_the_cluster_manager_dies(opensearch_cluster, sidecar,
                                                                        load_index):
    url, _ = sidecar
    index, queries = load_index
    es_url = all_urls(opensearch_cluster)

    def searcher(mode: str, es_timeout: float = ES_TIMEOUT_S):
        return open_searcher(es_url, index, mode, url, TOKEN, es_timeout=es_timeout,
                             sidecar_timeout=ES_TIMEOUT_S, window=50)

    single = {mode: searcher(mode, es_timeout=60.0) for mode in MODES}  # the first rerank warms ml-commons
    healthy = healthy_answers(single, queries)
    first_stage = first_stage_answers(single["bridge"], queries)
    assert all(a.reranked for answers in healthy.values() for a in answers.values())
    killed = manager_index(opensearch_cluster)
    clients = [(mode, searcher(mode)) for mode in MODES for _ in range(2)]
    try:
        tallies = search_load(clients, queries, seconds=12.0, max_searches=20_000, during_at=3.0,
                              during=lambda: cluster_nodes.kill_node(opensearch_cluster.root, killed))
    finally:
        health = rejoin(opensearch_cluster, killed)
    assert health["status"] == "green"
    for mode, tally in tallies.items():
        assert tally.unclean == [], (mode, tally.unclean[:3])  # every failure is the product's one line
        assert all("\n" not in line for line in tally.errors), mode
        assert tally.slowest_s < DEADLINE_S, (mode, tally.summary())
        assert tally.answered + tally.fallback > 0, (mode, tally.summary())
        assert stray_answers(tally, healthy[mode], first_stage) == [], mode
    # the node back in, every mode answers as it did before the loss
    assert healthy_answers(single, queries[:5]) == {m: {q: healthy[m][q] for q in queries[:5]} for m in MODES}


def test_a_comma_separated_es_url_names_each_bad_node_url_in_one_line(cli):
    """``--es-url`` with several nodes checks each (a user's typo is named, not a traceback)."""
    code, _, err = cli(["es", "search", "how do I mount exfat", "--es-url",
                        "http://127.0.0.1:9,127.0.0.1:9200", "--sidecar", "http://127.0.0.1:9"])
    assert code != 0 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == ("error: --es-url must start with http:// or https://, "
                                            "got '127.0.0.1:9200'")


def test_with_a_shard_missing_every_mode_fails_in_one_line_naming_it_sent_once(opensearch_cluster, sidecar,
                                                                              load_index):
    """Issue 48, finding 4, on three nodes: the load's index given no replica and one shard per node
    (``index.routing.allocation.total_shards_per_node: 1``), then a node that is not the cluster manager
    killed: its shard has no copy left. A search needs one active copy of every shard; with
    ``allow_partial_search_results=false`` (sent by the product) the coordinating node refuses it, 503
    ``Search rejected due to missing shards`` in ``caused_by`` (``AbstractSearchAsyncAction.run``). With
    ``--es-url`` naming all three nodes (the dead one's URL first), each mode's search fails in one line
    naming that shard and the node that answered, and is sent to a live node once (before: 1,457 of 4,372
    bridge searches said ``OpenSearch is unreachable`` with the dead node's port, each search sent up to
    four times). The node rejoins and the index gets its replica back."""
    url, _ = sidecar
    index, queries = load_index
    first = opensearch_cluster.nodes[0]
    first.ok("PUT", f"/{index}/_settings", {"index": {"number_of_replicas": 0,
                                                       "routing.allocation.total_shards_per_node": 1}})
    first.ok("GET", f"/_cluster/health/{index}?wait_for_status=green&wait_for_no_relocating_shards=true"
                    "&timeout=120s")
    shards = first.ok("GET", f"/_cat/shards/{index}?format=json&h=shard,prirep,state,node")
    manager = manager_index(opensearch_cluster)
    held = {int(s["node"].rsplit("-", 1)[1]): int(s["shard"]) for s in shards if s["prirep"] == "p"}
    killed = next(i for i in sorted(held) if i != manager)
    live = [i for i in range(3) if i != killed]
    cluster_nodes.kill_node(opensearch_cluster.root, killed)
    try:
        # Once the cluster manager has removed the node, the shard has no copy (red). Before that, a search
        # reaching the dead copy fails with a transport error and is sent once more (``lost_copy``: another
        # copy may answer), which is the node-left-mid-search case, not this one.
        opensearch_cluster.nodes[live[0]].ok(
            "GET", f"/_cluster/health/{index}?wait_for_nodes=2&timeout=120s")
        with recording(opensearch_cluster.nodes[live[0]].url) as one, \
                recording(opensearch_cluster.nodes[live[1]].url) as two:
            es_url = ",".join([opensearch_cluster.nodes[killed].url, one.url, two.url])
            failures = {}
            for mode in MODES:
                searcher = open_searcher(es_url, index, mode, url, TOKEN, es_timeout=ES_TIMEOUT_S,
                                         sidecar_timeout=ES_TIMEOUT_S, window=50)
                before = (len(one.requests), len(two.requests))
                with pytest.raises(UserError) as err:
                    search_once(searcher, queries[0])
                sent = [r for r in one.requests[before[0]:] + two.requests[before[1]:]
                        if r[1].endswith(("/_search", "/_msearch"))]
                failures[mode] = (str(err.value), len(sent))
        answering = {one.url.split("://")[1], two.url.split("://")[1]}
        for mode, (message, sent) in failures.items():
            assert "\n" not in message, (mode, message)
            missing = f"Search rejected due to missing shards [[{index}][{held[killed]}]]"
            assert missing in message, (mode, message)
            assert any(f"OpenSearch at {at} answered 503" in message for at in answering), (mode, message)
            assert "unreachable" not in message, (mode, message)
            assert sent == 1, (mode, sent, message)
    finally:
        rejoin(opensearch_cluster, killed)
        first.ok("PUT", f"/{index}/_settings", {"index": {"number_of_replicas": 1,
                                                           "routing.allocation.total_shards_per_node": None}})
        first.ok("GET", f"/_cluster/health/{index}?wait_for_status=green&timeout=120s")
