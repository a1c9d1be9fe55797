"""The registry of modes is the one list: every registered mode is found in every place that offers or
checks modes — both commands' ``--mode`` choices, the version and licence check, the vector modes, the
results index — and is built through its own entry. (The lists written out in seven places had
drifted apart: the results index refused ``hybrid`` after a whole ``es evaluate`` run.)
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from es_plugin_bridge.cli.es import search_command
from es_plugin_bridge.cli.es_evaluate import EXTRA
from es_plugin_bridge.elastic.connection import ClusterInfo
from es_plugin_bridge.elastic.mode_factory import refuse_without_vectors
from es_plugin_bridge.elastic.mode_registry import (
    ModeSpec,
    mode_names,
    mode_spec,
    register_mode,
    vector_modes,
)
from es_plugin_bridge.errors import UserError

MODES = mode_names()


def test_the_modes_are_registered_in_help_order_with_their_engines():
    assert MODES == ("native", "vectors", "bridge", "hybrid", "hybrid-rrf", "rerank")
    assert vector_modes() == ("vectors", "hybrid", "hybrid-rrf")
    assert mode_names("elasticsearch") == ("native", "vectors", "bridge", "hybrid", "hybrid-rrf")
    assert mode_names("opensearch") == ("vectors", "bridge", "hybrid", "hybrid-rrf", "rerank")
    assert {m: mode_spec(m).ranker for m in MODES} == {
        "native": "fused", "vectors": "fused", "bridge": "fused", "hybrid": "hybrid",
        "hybrid-rrf": "hybrid-rrf", "rerank": "model"}


@pytest.mark.parametrize("mode", MODES)
def test_every_place_that_names_modes_has_this_one(mode):
    searched = next(p for p in search_command.params if p.name == "mode").type.choices
    evaluated = next(o for o in EXTRA if o.name == "mode").type.choices
    assert mode in searched and mode in evaluated
    spec = mode_spec(mode)
    assert callable(spec.load())  # its builder exists where its entry says
    for engine in spec.engines:  # the requirement table knows it: each engine's newest cluster runs it
        newest = ClusterInfo((9, 5, 0), "trial", True) if engine == "elasticsearch" else \
            ClusterInfo((2, 19, 1), "apache-2.0", True, "opensearch")
        newest.require(mode)
        assert set(spec.requires) <= set(spec.engines)  # no requirement for an engine it does not run on
    pairwise = SimpleNamespace(pairwise=True, model="tiny", model_type="cross-encoder")
    if spec.needs_vectors:
        with pytest.raises(UserError, match=f"mode {mode} needs the model's vectors"):
            refuse_without_vectors(mode, pairwise)
    else:
        refuse_without_vectors(mode, pairwise)


@pytest.mark.parametrize(("mode", "cluster", "says"), [
    ("native", ClusterInfo((9, 0, 3), "trial", True), r"needs Elasticsearch 8\.19\+ or 9\.1\+"),
    ("native", ClusterInfo((9, 1, 0), "basic", True), "needs an enterprise or trial licence"),
    ("hybrid", ClusterInfo((8, 7, 0), "basic", True), r"needs Elasticsearch 8\.8\+"),
])
def test_a_modes_own_requirements_are_checked(mode, cluster, says):
    with pytest.raises(UserError, match=says):
        cluster.require(mode)
    ClusterInfo((9, 1, 0), "basic", True).require("bridge")  # bridge needs nothing of a cluster
    with pytest.raises(UserError, match=r"mode rerank does not run on Elasticsearch 9\.1\.0; its modes: nat"):
        ClusterInfo((9, 1, 0), "trial", True).require("rerank")
    with pytest.raises(UserError, match=r"mode rerank needs OpenSearch 2\.15\+; this cluster is 2\.13\.0"):
        ClusterInfo((2, 13, 0), "apache-2.0", True, "opensearch").require("rerank")
    # hybrid reads named-query scores: Elasticsearch 8.8, OpenSearch 2.13 (each engine its own entry)
    with pytest.raises(UserError, match=r"mode hybrid needs OpenSearch 2\.13\+; this cluster is 2\.12\.0"):
        ClusterInfo((2, 12, 0), "apache-2.0", True, "opensearch").require("hybrid")
    ClusterInfo((2, 13, 0), "apache-2.0", True, "opensearch").require("hybrid")
    ClusterInfo((3, 0, 0), "apache-2.0", True, "opensearch").require("hybrid")
    ClusterInfo((2, 0, 0), "apache-2.0", True, "opensearch").require("vectors")


def test_an_unknown_mode_is_one_line_naming_the_known_ones():
    with pytest.raises(UserError, match=r"unknown mode 'rescore' \(known: native, vectors, bridge"):
        mode_spec("rescore")


def test_a_name_cannot_be_registered_twice():
    with pytest.raises(ValueError, match="mode 'bridge' is registered twice"):
        register_mode(ModeSpec("bridge", "x:y", "again"))
