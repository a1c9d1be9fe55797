"""A node lost, nothing lost: ``es index`` and a search load on a three-node OpenSearch cluster while one
node is killed (``kill -9``), in full (issue 35, item 3); ``tests/cluster/test_cluster_node_loss.py`` is
the shortened form that ``make test`` runs.

On three Maven-assembled OpenSearch 2.19.1 nodes on 127.0.0.1 (``opensearch_node/cluster.py``, 512 MB a
node) and ``esrerank serve`` of the tests' tiny BOW-CNN (``tests/tiny_models.py``; ``--model`` another
export), all on this machine. Every index has one replica: 3 shards × 1 replica where ``es setup`` takes
``--shards``/``--replicas``, else its one shard with a replica.

*Indexing*: ``es index`` of ``--questions`` AskUbuntu questions (the 1,804 with HTML bodies, then titles)
in batches of 50, twice: the elected cluster manager killed once a third is stored, ``--es-url`` naming
every node (the client fails over); then a data node killed, ``--es-url`` naming only that node (the
run stops; ``--resume`` once the cluster is green again). Then: how many are stored, how many ids are
missing or extra, and how many stored vectors or terms differ from the sidecar's own answer.

*Search load*: per mode, ``--clients`` threads search AskUbuntu titles (not in the index) for
``--load-seconds``; a third of the way in a node is killed (the cluster manager for the first mode, then
data nodes and the manager in turn), restarted at the end of the load, and the cluster waited green
before the next mode. Each search is counted answered (reranked), fallback (first-stage order) or failed,
with its slowest; every answer is compared with the healthy cluster's.

Nothing but 127.0.0.1 is loaded, and each load is bounded in time and in count. No figure here is a
pass/fail threshold; the JSON records exactly what ran.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from _machine import load_average, machine  # noqa: E402
from es_commands import TOKEN, embeddings, run  # noqa: E402
from live_sidecar import serve  # noqa: E402
from node_loss_load import (  # noqa: E402
    MODES,
    askubuntu_questions,
    first_stage_answers,
    healthy_answers,
    open_searcher,
    search_load,
    start_indexing,
    stray_answers,
    write_jsonl,
)

from es_plugin_bridge.core.features import bow_features  # noqa: E402
from es_plugin_bridge.elastic import mappings  # noqa: E402
from es_plugin_bridge.errors import UserError  # noqa: E402
from es_plugin_bridge.opensearch_node import cluster as cluster_nodes  # noqa: E402
from es_plugin_bridge.opensearch_node import layout, node  # noqa: E402
from es_plugin_bridge.text.sidecar_text import rerank_text  # noqa: E402


def http(url: str, method: str = "GET", body: Any = None) -> dict[str, Any]:
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=120) as resp:
        return json.loads(resp.read() or b"{}")


def esrerank(argv: list[str]) -> tuple[int, str, str]:
    """``esrerank ARGV`` in process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


class Cluster:
    """The benchmark's own three nodes: URLs, who manages, kill and restart."""

    def __init__(self, home: Path, root: Path) -> None:
        self.home, self.root = home, root
        self.urls = [n.url for n in cluster_nodes.start_cluster(home, root, count=3)]

    @property
    def es_url(self) -> str:
        return ",".join(self.urls)

    def manager(self) -> int:
        for url in self.urls:
            with contextlib.suppress(OSError):
                state = http(f"{url}/_cluster/state/cluster_manager_node,nodes")
                return int(state["nodes"][state["cluster_manager_node"]]["name"].rsplit("-", 1)[1])
        raise RuntimeError("no node answers")

    def kill(self, index: int) -> None:
        cluster_nodes.kill_node(self.root, index)

    def rejoin(self, index: int) -> float:
        """Restart node ``index``; seconds until the cluster has three nodes and is green."""
        start = time.monotonic()
        cluster_nodes.restart_node(self.home, self.root, index)
        health = cluster_nodes.wait_for_nodes(self.urls[(index + 1) % 3], 3, timeout=600)
        assert health["status"] == "green", health
        node.wait_ready(self.urls[index], timeout=300)  # its HTTP opens after it joined the cluster
        return round(time.monotonic() - start, 1)

    def stop(self) -> None:
        for running in cluster_nodes.running_nodes(self.root):
            node.stop(running)


#: ml-commons' first write on a fresh cluster: the master key not fetched in time; a second ``es setup``
#: succeeds (a PARTIALLY_DEPLOYED model ``opensearch_ml.wait_deployed`` deploys again itself).
RETRIED = ("Fetching master key timed out",)


def setup(cluster: Cluster, sidecar: str, model: Path, index: str) -> str:
    """``es setup`` with one replica; how the index is laid out."""
    code, out, _ = esrerank(["es", "setup", "--help"])
    shards = ["--shards", "3", "--replicas", "1"] if "--shards" in out else []
    for _ in range(3):
        code, _, err = esrerank(["es", "setup", str(model), "--index", index, *shards, "--recreate",
                                 "--es-url", cluster.es_url, "--sidecar", sidecar, "--token", TOKEN])
        if code == 0 or not any(cause in err for cause in RETRIED):
            break
    if code:
        raise SystemExit(f"es setup failed: {err}")
    if not shards:
        http(f"{cluster.urls[0]}/{index}/_settings", "PUT", {"index": {"number_of_replicas": 1}})
    http(f"{cluster.urls[0]}/_cluster/health/{index}?wait_for_status=green&timeout=120s")
    settings = http(f"{cluster.urls[0]}/{index}/_settings")[index]["settings"]["index"]
    return f"{settings['number_of_shards']} shard(s) x {settings['number_of_replicas']} replica(s)"


def stored(cluster: Cluster, index: str) -> dict[str, dict]:
    """Every document of ``index`` (scrolled), by id."""
    url = cluster.urls[0]
    http(f"{url}/{index}/_refresh", "POST")
    answer = http(f"{url}/{index}/_search?scroll=2m", "POST", {"size": 5000, "query": {"match_all": {}}})
    out: dict[str, dict] = {}
    while answer["hits"]["hits"]:
        out.update({h["_id"]: h["_source"] for h in answer["hits"]["hits"]})
        answer = http(f"{url}/_search/scroll", "POST", {"scroll": "2m", "scroll_id": answer["_scroll_id"]})
    return out


def differs(doc: dict, embedding: dict, question: Any) -> bool:
    """Whether a stored document is not what the sidecar answers (``es_commands.assert_stored_as_embedded``'s
    rules, as a count)."""
    import numpy as np

    if doc.get("rerank_text") != rerank_text(question):
        return True
    vector = np.float32(embedding["vector"])
    if mappings.has_direction(embedding["vector"]) and (
            "vector" not in doc or np.abs(np.float32(doc["vector"]) - vector).max() > 1e-6):
        return True
    want, got = bow_features(embedding["terms"]), doc.get("bow", {})
    return set(got) != set(want) or any(np.float32(got[k]) != np.float32(want[k]) for k in want)


def indexing_run(cluster: Cluster, sidecar: str, model: Path, questions: list, spec: str, which: str
                 ) -> dict[str, Any]:
    """One ``es index`` with a node killed a third of the way; resumed if it stopped; what is stored."""
    index = f"node-loss-{which.split()[-1]}"
    layout_text = setup(cluster, sidecar, model, index)
    manager = cluster.manager()
    victim = manager if which == "elected cluster manager" else (manager + 1) % 3
    es_url = cluster.es_url if which == "elected cluster manager" else cluster.urls[victim]
    survivor = cluster.urls[(victim + 1) % 3]
    start = time.monotonic()
    process = start_indexing(spec, index, es_url, sidecar, TOKEN, "--batch-size", "50", "--max-retries", "1")
    at = len(questions) // 3
    while process.poll() is None:
        http(f"{survivor}/{index}/_refresh", "POST")
        if http(f"{survivor}/{index}/_count")["count"] >= at:
            break
        time.sleep(0.5)
    killed_at = http(f"{survivor}/{index}/_count")["count"]
    cluster.kill(victim)
    out, err = process.communicate(timeout=3600)
    first_run_s = round(time.monotonic() - start, 1)
    green_s = cluster.rejoin(victim)
    report = next((line for line in out.splitlines() if line.startswith("read ")), "")
    resumed = None
    if process.returncode:
        line = next(line for line in out.splitlines() if line.startswith("resume with: "))
        os.environ["ESRERANK_TOKEN"] = TOKEN  # the printed command reads it, as the first run did
        argv = shlex.split(os.path.expandvars(line.removeprefix("resume with: ")))[1:]
        code, rout, rerr = esrerank(argv)
        line = next((x for x in rout.splitlines() if x.startswith("read ")), rerr.strip())
        resumed = {"exit": code, "report": line, "first_failure": first_failure(rout)}
    docs = stored(cluster, index)
    count = http(f"{survivor}/{index}/_count")["count"]
    wanted = embeddings(sidecar, questions)
    ids = {q.id for q in questions}
    result = {
        "killed": which, "es_url": "every node's URL" if "," in es_url else "the killed node's URL alone",
        "index": layout_text, "questions": len(questions), "killed_when_stored": killed_at,
        "first_run": {"exit": process.returncode, "report": report, "seconds": first_run_s,
                      "first_failure": first_failure(out),
                      "error": err.strip().splitlines()[-1] if err.strip() else None},
        "seconds_to_green_after_restart": green_s, "resumed": resumed,
        "stored": count, "missing": len(ids - set(docs)), "extra": len(set(docs) - ids),
        "duplicates": count - len(docs),
        "vector_or_terms_differ": sum(differs(docs[q.id], wanted[q.id], q)
                                      for q in questions if q.id in docs),
    }
    print(json.dumps(result), flush=True)
    return result


def first_failure(out: str) -> str | None:
    """The first ``failed ID: reason`` line of a run's report (cut to 300 characters)."""
    return next((line[:300] for line in out.splitlines() if line.startswith("failed ")), None)


def load_runs(cluster: Cluster, sidecar: str, index: str, queries: list[str], args: argparse.Namespace
              ) -> dict[str, Any]:
    """Per mode: ``--clients`` threads for ``--load-seconds``, a node killed a third of the way in."""
    def searcher(mode: str) -> Any:
        return open_searcher(cluster.es_url, index, mode, sidecar, TOKEN, es_timeout=args.es_timeout,
                             sidecar_timeout=args.sidecar_timeout, window=args.window)

    single = {mode: open_searcher(cluster.es_url, index, mode, sidecar, TOKEN, es_timeout=60.0,
                                  sidecar_timeout=60.0, window=args.window) for mode in MODES}
    healthy = healthy_answers(single, queries)
    first_stage = first_stage_answers(single["bridge"], queries)
    out: dict[str, Any] = {}
    for n, mode in enumerate(MODES):
        manager = cluster.manager()
        victim = manager if n % 2 == 0 else (manager + 1 + n // 2) % 3
        clients = [(mode, searcher(mode)) for _ in range(args.clients)]
        tallies = search_load(clients, queries, seconds=args.load_seconds, max_searches=args.max_searches,
                              during_at=args.load_seconds / 3, during=lambda v=victim: cluster.kill(v))
        green_s = cluster.rejoin(victim)
        tally = tallies[mode]
        try:
            after = healthy_answers({mode: single[mode]}, queries[:10])[mode]
        except UserError as exc:
            after = {"error": str(exc)}
        strays = stray_answers(tally, healthy[mode], first_stage)
        stray_queries = sorted({query for query, _ in strays})
        tied = [q for q in stray_queries if window_has_tie(single["bridge"], q, args.window)]
        out[mode] = {"killed": "elected cluster manager" if victim == manager else "data node",
                     **tally.summary(), "answers_unlike_healthy": len(strays),
                     "queries_unlike_healthy": len(stray_queries),
                     "of_them_with_a_first_stage_tie": len(tied),
                     "unlike_healthy_examples": [line for _, line in strays[:3]],
                     "after_rejoin_equal_healthy": all(after[q] == healthy[mode].get(q) for q in after),
                     "seconds_to_green_after_restart": green_s}
        print(mode, json.dumps(out[mode]), flush=True)
    return out


def window_has_tie(searcher: Any, query: str, window: int) -> bool:
    """Whether two documents of the query's first-stage window score exactly alike: the engine orders
    such a tie by document within the shard copy that answers, and a primary and its replica number
    their documents independently, so which copy answers decides the tie's order (docs/scaling-out.md,
    "Equal scores"); ``hybrid-rrf`` fuses ranks, so its fused scores follow that order."""
    from es_plugin_bridge.data.questions import question_from_text

    scores = [s for _, s in searcher.stage.search(question_from_text(query), window)]
    return any(abs(a - b) <= 1e-6 * max(abs(a), 1.0) for a, b in zip(scores, scores[1:], strict=False))


def tiny_model() -> Path:
    """The tests' tiny BOW-CNN export (built into build/node-loss-models once)."""
    root = ROOT / "build" / "node-loss-models"
    if not (root / "bow-cnn" / "manifest.json").is_file():
        subprocess.run([sys.executable, str(ROOT / "tests" / "tiny_models.py"), str(root)], check=True)
    return root / "bow-cnn"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=20_000)
    parser.add_argument("--load-seconds", type=float, default=120.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--max-searches", type=int, default=200_000,
                        help="Per mode: the load's bound in count.")
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--es-timeout", type=float, default=10.0)
    parser.add_argument("--sidecar-timeout", type=float, default=10.0)
    parser.add_argument("--model", type=Path, default=None, help="An export (default: the tiny BOW-CNN).")
    parser.add_argument("--out", type=Path, default=HERE / "node_loss.json")
    parser.add_argument("--only-data-node-indexing", action="store_true",
                        help="Run only the data-node indexing run (stop, resume) and replace that entry of "
                             "the existing --out, recording this command under 'amended'.")
    args = parser.parse_args()
    model = args.model or tiny_model()
    home = layout.assemble(layout.default_home(ROOT))
    questions = askubuntu_questions(args.questions + 50)
    indexed, queries = questions[:args.questions], [q.title for q in questions[args.questions:]]
    shown = model.relative_to(ROOT) if model.is_relative_to(ROOT) else model
    report = machine(cluster="3 OpenSearch 2.19.1 nodes assembled from Maven Central, 512 MB heap each, "
                             "on this machine", model=str(shown))
    report["command"] = " ".join(["python", "benchmarks/node_loss.py", *sys.argv[1:]])
    report["config"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    with tempfile.TemporaryDirectory(prefix="node-loss-") as tmp:
        cluster = Cluster(home, Path(tmp) / "cluster")
        try:
            with serve(model, TOKEN, Path(tmp)) as sidecar:
                spec = write_jsonl(indexed, Path(tmp) / "askubuntu.jsonl")
                if args.only_data_node_indexing:
                    again = indexing_run(cluster, sidecar, model, indexed, spec, "data node")
                else:
                    report["indexing"] = [indexing_run(cluster, sidecar, model, indexed, spec, which)
                                          for which in ("elected cluster manager", "data node")]
                    report["search_load"] = load_runs(cluster, sidecar, "node-loss-manager", queries, args)
        finally:
            cluster.stop()
    if args.only_data_node_indexing:
        earlier = json.loads(args.out.read_text())
        earlier["indexing"] = [r for r in earlier["indexing"] if r["killed"] != "data node"] + [again]
        earlier.setdefault("amended", []).append({"command": report["command"],
                                                  "load_average_at_start": report["load_average_at_start"],
                                                  "load_average_at_end": load_average()})
        report = earlier
    report["load_average_at_end"] = report.get("load_average_at_end") or load_average()
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
