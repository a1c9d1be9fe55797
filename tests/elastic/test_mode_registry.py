"""The registry of modes is the one list: every registered mode is found in every place that offers or
checks modes — both commands' ``--mode`` choices, the version and licence check, the vector modes, the
results index — and is built through its own entry. (The lists written out in seven places had
drifted apart: the results index refused ``hybrid`` after a whole ``es evaluate`` run.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from es_plugin_bridge.cli.es import search_command
from es_plugin_bridge.cli.es_evaluate import EXTRA
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo
from es_plugin_bridge.elastic.modes import (
    ModeSpec,
    mode_names,
    mode_spec,
    register_mode,
    require,
    vector_modes,
)
from es_plugin_bridge.elastic.modes.factory import refuse_without_vectors
from es_plugin_bridge.elastic.setup import IndexMeta
from es_plugin_bridge.errors import UserError

MODES = mode_names()


def test_the_modes_are_registered_in_help_order_with_their_engines():
    assert MODES == ("learned-hybrid", "native", "vectors", "bridge", "hybrid", "hybrid-rrf", "rerank")
    assert vector_modes() == ("learned-hybrid", "vectors", "hybrid", "hybrid-rrf")
    assert mode_names("elasticsearch") == ("learned-hybrid", "native", "vectors", "bridge", "hybrid",
                                           "hybrid-rrf")
    assert mode_names("opensearch") == ("learned-hybrid", "vectors", "bridge", "hybrid", "hybrid-rrf",
                                        "rerank")
    assert {m: mode_spec(m).ranker for m in MODES} == {
        "learned-hybrid": "learned-hybrid", "native": "fused", "vectors": "fused", "bridge": "fused",
        "hybrid": "hybrid", "hybrid-rrf": "hybrid-rrf", "rerank": "model"}


@pytest.mark.parametrize("mode", MODES)
def test_every_place_that_names_modes_has_this_one(mode):
    searched = next(p for p in search_command.params if p.name == "mode").type.choices
    evaluated = next(o for o in EXTRA if o.name == "mode").type.choices
    assert mode in searched and mode in evaluated
    spec = mode_spec(mode)
    package, module = spec.builder.__module__.rsplit(".", 1)  # built by the mode's own module
    assert package == "es_plugin_bridge.elastic.modes" and module not in ("base", "factory")
    assert spec.prepare is None or spec.prepare.__module__ == spec.builder.__module__
    for engine in spec.engines:  # the requirement table knows it: each engine's newest cluster runs it
        newest = ClusterInfo((9, 5, 0), "trial", True) if engine == "elasticsearch" else \
            ClusterInfo((2, 19, 1), "apache-2.0", True, "opensearch")
        require(newest, mode)
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
    # the hybrid query's pagination_depth: neural-search 2.19 (HybridQueryBuilder.PAGINATION_DEPTH_FIELD)
    ("learned-hybrid", ClusterInfo((2, 18, 0), "apache-2.0", True, "opensearch"),
     r"needs OpenSearch 2\.19\+"),
])
def test_a_modes_own_requirements_are_checked(mode, cluster, says):
    with pytest.raises(UserError, match=says):
        require(cluster, mode)
    require(ClusterInfo((9, 1, 0), "basic", True), "bridge")  # bridge needs nothing of a cluster
    with pytest.raises(UserError,
                       match=r"mode rerank does not run on Elasticsearch 9\.1\.0; its modes: "
                             r"learned-hybrid, nat"):
        require(ClusterInfo((9, 1, 0), "trial", True), "rerank")
    with pytest.raises(UserError, match=r"mode rerank needs OpenSearch 2\.15\+; this cluster is 2\.13\.0"):
        require(ClusterInfo((2, 13, 0), "apache-2.0", True, "opensearch"), "rerank")
    # hybrid reads named-query scores: Elasticsearch 8.8, OpenSearch 2.13 (each engine its own entry)
    with pytest.raises(UserError, match=r"mode hybrid needs OpenSearch 2\.13\+; this cluster is 2\.12\.0"):
        require(ClusterInfo((2, 12, 0), "apache-2.0", True, "opensearch"), "hybrid")
    require(ClusterInfo((2, 13, 0), "apache-2.0", True, "opensearch"), "hybrid")
    require(ClusterInfo((3, 0, 0), "apache-2.0", True, "opensearch"), "hybrid")
    require(ClusterInfo((2, 0, 0), "apache-2.0", True, "opensearch"), "vectors")


def test_an_unknown_mode_is_one_line_naming_the_known_ones():
    with pytest.raises(UserError,
                       match=r"unknown mode 'rescore' \(known: learned-hybrid, native, vectors, bridge"):
        mode_spec("rescore")


def test_a_name_cannot_be_registered_twice():
    with pytest.raises(ValueError, match="mode 'bridge' is registered twice"):
        register_mode(ModeSpec("bridge", print, "again"))


TOY_MODE = '''"""Mode ``toy``: a test's mode, one module and nothing else edited: the first stage's order."""

from es_plugin_bridge.elastic.modes import ModeSpec, register_mode
from es_plugin_bridge.elastic.modes.base import Mode, ModeResult


class ToyMode(Mode):
    name = "toy"

    def rank(self, ask, timings):
        return ModeResult(self.stage.search(ask.query, ask.k, set(ask.exclude or ())), False)


def build_toy(stage, meta, options):
    return ToyMode(stage, meta.beta(stage.similarity), options.window)


register_mode(ModeSpec(
    "toy", build_toy, "the toy mode",
    engines=("opensearch",), order=6, ranker="fused", sidecar="the toy client",
    requires={"opensearch": {"version": {2: (2, 17)}, "version_text": "2.17+"}}))
'''
LIST_MODES = '''
import json, subprocess, sys
from click.testing import CliRunner
from es_plugin_bridge.cli.main import cli
from es_plugin_bridge.elastic import modes as mode_registry
sys.path.insert(0, sys.argv[1])
import modes as docs_modes
helps = {c: CliRunner().invoke(cli, ["es", c, "--help"], terminal_width=200).output
         for c in ("search", "evaluate")}
print(json.dumps({"file": mode_registry.__file__, "modes": mode_registry.mode_names(),
                  "opensearch": mode_registry.mode_names("opensearch"), "help": helps,
                  "table": docs_modes.render(),
                  "builder": mode_registry.mode_spec("toy").builder.__module__}))
'''


def test_a_mode_is_one_module(tmp_path):
    """One file dropped into a copy of ``elastic/modes``, nothing else edited: both commands'
    ``--mode`` choices offer it, the registry lists it for its engine, and the docs' generated modes
    table (``docs/hooks/modes.py``) has its row."""
    import es_plugin_bridge

    package = Path(es_plugin_bridge.__file__).parent
    shutil.copytree(package, tmp_path / package.name, ignore=shutil.ignore_patterns("samples", "__pycache__"))
    (tmp_path / package.name / "elastic" / "modes" / "toy.py").write_text(TOY_MODE, encoding="utf-8")
    hooks = Path(__file__).resolve().parents[2] / "docs" / "hooks"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", LIST_MODES, str(hooks)], capture_output=True, text=True,
                         check=True, timeout=120, cwd=tmp_path, env=env)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["file"].startswith(str(tmp_path)) and got["builder"] == "es_plugin_bridge.elastic.modes.toy"
    assert got["modes"] == [*MODES, "toy"] and got["opensearch"][-1] == "toy"
    assert all("toy" in text.split("--mode", 1)[1].split("\n  --", 1)[0] for text in got["help"].values())
    assert "| `toy` | the toy client | — | 2.17+, any licence | `fused` |" in got["table"].splitlines()


def test_listing_the_modes_loads_no_search_client():
    """Every mode's module is imported to list the modes (``--help`` of every ``es`` command), so a
    module's own imports must stay cheap: neither client (0.5 s and 900 modules) is loaded until a
    request body is built (``queries`` loads ``elasticsearch.dsl`` then)."""
    code = ("import sys; from es_plugin_bridge.elastic.modes import mode_names, mode_spec; "
            "names = mode_names(); [mode_spec(n).builder for n in names]; "
            "print(len(names), sorted(m for m in ('elasticsearch', 'opensearchpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == [str(len(MODES)), "[]"]


def _meta(**changes: object) -> IndexMeta:
    fields: dict = {"model": "m", "model_type": "transformer", "dimension": 384,
                    "neural_similarity": "cosine", "fusion": {"bm25": {}}, "text": {}}
    return IndexMeta(**{**fields, **changes})  # type: ignore[arg-type]


TRIAL = ClusterInfo((9, 1, 0), "trial", True)
BASIC = ClusterInfo((9, 1, 0), "basic", True)
OPENSEARCH = ClusterInfo((2, 19, 1), "apache-2.0", True, "opensearch")


@pytest.mark.parametrize(("cluster", "meta", "expected"), [
    (TRIAL, _meta(hybrid={"normalization": "min_max"}), "learned-hybrid"),
    (OPENSEARCH, _meta(hybrid={"normalization": "min_max"}, search_pipeline="p"), "learned-hybrid"),
    (OPENSEARCH, _meta(search_pipeline="p"), "rerank"),
    (TRIAL, _meta(), "hybrid"),
    (TRIAL, _meta(dimension=None, inference={"bm25": "ep"}), "native"),
    (TRIAL, _meta(pairwise=True, inference={"bm25": "ep"}, hybrid={"normalization": "min_max"}), "native"),
    # what the cluster cannot run is not suggested (ModeSpec.unavailable): native without the licence,
    # the hybrids on an OpenSearch older than their features
    (BASIC, _meta(dimension=None, inference={"bm25": "ep"}), "bridge"),
    (ClusterInfo((2, 11, 0), "apache-2.0", True, "opensearch"), _meta(hybrid={"normalization": "min_max"}),
     "bridge"),
    (ClusterInfo((2, 15, 0), "apache-2.0", True, "opensearch"),
     _meta(hybrid={"normalization": "min_max"}, search_pipeline="p"), "rerank"),
    (TRIAL, _meta(dimension=None), "bridge"),
])
def test_the_suggested_mode_is_the_first_ready_by_the_modes_own_rules(cluster, meta, expected):
    """``IndexMeta.suggested_mode`` reads ``ModeSpec.unavailable``: the mode ``es search`` runs without
    ``--mode`` is one that this cluster runs on this index, never one ``make_mode`` would refuse."""
    assert meta.suggested_mode(cluster) == expected
    assert mode_spec(expected).unavailable(cluster, meta) is None
