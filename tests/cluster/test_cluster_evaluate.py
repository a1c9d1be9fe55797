"""``es evaluate --shards 3`` on the three-node cluster reproduces the in-process figures of every
OpenSearch mode, to the sixth digit: its run's index is split over three shards, and every search it
makes asks for global statistics (``elastic/cluster/shards.py``), so the first stage, the windows and the
rescoring are the single shard's. SemEval-2016 dev reranked (``bridge``, ``vectors``, ``rerank``) and
AskUbuntu pairs with bodies retrieved, each query's own question excluded (``learned-hybrid``, the
default, ``hybrid``, ``hybrid-rrf``). Each mode is compared with the in-process ranker its registry entry
names (``ModeSpec.ranker``, what ``es evaluate``'s parity replays on); a mode added to the registry for
OpenSearch fails here until it is given its task.
"""

from __future__ import annotations

import json

import pytest
from es_commands import SEMEVAL_DEV
from shard_checks import ASKUBUNTU_VAL, bow_cnn_sidecar, connection

from es_plugin_bridge.elastic.modes import mode_names, mode_spec

pytestmark = [pytest.mark.cluster, pytest.mark.engine, pytest.mark.slow]

WINDOW = 50
#: mode → the task it is evaluated on
MODES = {"bridge": "rerank", "vectors": "rerank", "rerank": "rerank",
         "learned-hybrid": "retrieval", "hybrid": "retrieval", "hybrid-rrf": "retrieval"}


def test_every_mode_opensearch_runs_is_evaluated_here():
    assert set(MODES) == set(mode_names("opensearch"))


@pytest.fixture(scope="module")
def sidecar(exported, tmp_path_factory):
    with bow_cnn_sidecar(exported, tmp_path_factory.mktemp("token")) as found:
        yield found


@pytest.mark.parametrize("mode", list(MODES))
def test_es_evaluate_on_three_shards_gives_the_in_process_figures(opensearch_cluster, sidecar, cli, tmp_path,
                                                                  mode):
    url, model = sidecar
    ranker, task = mode_spec(mode).ranker, MODES[mode]
    if task == "rerank":
        data = ["--data", f"semeval:{SEMEVAL_DEV}"]
    else:
        # questions with their bodies: titles alone tie (duplicates), and the engine orders equal scores
        # by shard (shard_checks.first_stage_ties), which would move a tie's rank, not a score
        path = tmp_path / "val.tsv"
        path.write_text("".join(ASKUBUNTU_VAL.read_text(encoding="utf-8").splitlines(keepends=True)[:300]),
                        encoding="utf-8")
        data = ["--queries", f"pairs:{path}", "--max-queries", "150"]  # of its ~600 questions
    base = ["--task", task, *data, "--rankers", f"bm25,lmdirichlet,{ranker}", "--model", str(model),
            "--first-stage", "bm25", "--no-progress"]
    code, _, err = cli(["evaluate", *base, "--param", f"{ranker}.window={WINDOW}",
                        "--json", str(tmp_path / "local.json")])
    assert code == 0, err
    code, out, err = cli(["es", "evaluate", *base, "--mode", mode, "--window", str(WINDOW), "--shards", "3",
                          "--keep-index", "--no-results-index", "--json", str(tmp_path / "cluster.json"),
                          *connection(opensearch_cluster, url)])
    assert code == 0, err
    local = json.loads((tmp_path / "local.json").read_text())["rankers"]
    remote = json.loads((tmp_path / "cluster.json").read_text())["rankers"]
    for name in ("bm25", "lmdirichlet", ranker):
        assert {k: round(v, 6) for k, v in remote[name].items()} == \
               {k: round(v, 6) for k, v in local[name].items()}, name
    # the run's index (kept, then deleted here) was split over three shards on the three nodes
    node = opensearch_cluster.nodes[0]
    (index,) = [i["index"] for i in node.ok("GET", "/_cat/indices/esrerank-eval-*?format=json")]
    assert node.ok("GET", f"/{index}/_settings")[index]["settings"]["index"]["number_of_shards"] == "3"
    assert len({row["node"] for row in node.ok("GET", f"/_cat/shards/{index}?format=json")}) == 3
    node.ok("DELETE", f"/{index}")
