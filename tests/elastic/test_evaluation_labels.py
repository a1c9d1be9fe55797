"""``es evaluate`` says where each ranker was computed: the first stages and the mode's own ranker by the
cluster, ``given`` by the data, anything else in process (and the table and JSON carry it)."""

from __future__ import annotations

import pytest

from es_plugin_bridge.elastic.evaluation_run import computed_by
from es_plugin_bridge.elastic.modes import mode_names, mode_spec
from es_plugin_bridge.evaluation.results import RankerResult, TaskResult

ASKED = ["given", "bm25", "lmdirichlet", "model", "fused", "hybrid"]


@pytest.mark.parametrize("mode", mode_names())
def test_only_the_modes_own_ranker_and_the_first_stages_come_from_the_cluster(mode):
    mine = mode_spec(mode).ranker
    where = computed_by([*ASKED, *([mine] if mine not in ASKED else [])], mine)
    assert where["given"] == "data" and where["bm25"] == where["lmdirichlet"] == where[mine] == "engine"
    assert {n for n, w in where.items() if w == "in process"} == {"model", "fused", "hybrid"} - {mine}


def test_the_json_and_the_table_label_what_ran_in_process():
    result = TaskResult("rerank", 2, ["map"], {n: RankerResult({"map": 0.5}) for n in ("bm25", "fused")})
    assert "computed_by" not in result.as_json() and result.label("fused") == "fused"  # in process run
    result.computed_by = computed_by(["bm25", "fused"], mode_spec("hybrid").ranker)
    assert result.as_json()["computed_by"] == {"bm25": "engine", "fused": "in process"}
    assert result.label("fused") == "fused (in process)" and result.label("bm25") == "bm25"
