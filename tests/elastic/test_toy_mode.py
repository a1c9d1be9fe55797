"""A mode is one module: a toy mode, with its own body, option and availability rule, registered here
and nowhere else, is offered by ``es search --help`` (``--mode`` and its option), gets its line in
``es setup``'s readiness lines (ready, or why not) and its row in the docs' generated modes table, and
``make_mode`` refuses it by its own rule. No file outside this test is edited for it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
from es_plugin_bridge.cli.main import cli
from es_plugin_bridge.elastic import modes as registry
from es_plugin_bridge.elastic import provision
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo
from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
from es_plugin_bridge.elastic.modes import ModeOption, ModeSpec, register_mode
from es_plugin_bridge.elastic.modes.base import Ask, Mode, ModeOptions, ModeResult
from es_plugin_bridge.elastic.modes.factory import make_mode, open_mode
from es_plugin_bridge.elastic.setup import IndexMeta
from es_plugin_bridge.errors import UserError

BETA = {"first_stage": 1.0, "bow": 0.5, "neural": 2.0}


class ToyMode(Mode):
    """Its own body: a ``match_all`` limited to the window (never sent here)."""

    name = "toy"

    def __init__(self, stage: ElasticsearchFirstStage, window: int, depth: int) -> None:
        super().__init__(stage, {}, window)
        self.depth = depth

    def body(self, ask: Ask) -> dict[str, Any]:
        return {"query": {"match_all": {}}, "size": min(ask.window, self.depth)}

    def rank(self, ask: Ask, timings: dict[str, float]) -> ModeResult:
        return ModeResult([], False, request=self.body(ask))


def build_toy(stage: ElasticsearchFirstStage, meta: IndexMeta, options: ModeOptions) -> Mode:
    return ToyMode(stage, options.window, int(options.extra.get("toy_depth", 5)))


def toy_rule(cluster: ClusterInfo, meta: IndexMeta) -> str | None:
    return None if "toy" in meta.params else "the index records no toy parameters"


TOY = ModeSpec("toy", build_toy, "the toy mode", engines=("elasticsearch", "opensearch"), order=9,
               sidecar="the toy client", rule=toy_rule,
               options=(ModeOption("--toy-depth", "toy_depth", "Mode toy: how deep it looks."),))


@pytest.fixture
def toy() -> Iterator[ModeSpec]:
    register_mode(TOY)
    yield TOY
    del registry._MODES["toy"]  # the other tests see the product's modes only


def meta(**changes: Any) -> IndexMeta:
    return IndexMeta(model="m", model_type="gru", dimension=3, neural_similarity="cosine",
                     fusion={"bm25": dict(BETA)}, text={}, **changes)


ELASTICSEARCH = ClusterInfo((9, 1, 0), "trial", True)
OPENSEARCH = ClusterInfo((2, 19, 1), "apache-2.0", True, "opensearch")


def test_the_toy_mode_is_offered_by_es_search_with_its_option(toy):
    text = CliRunner().invoke(cli, ["es", "search", "--help"], terminal_width=200).output
    assert "toy" in text.split("--mode", 1)[1].split("\n  --", 1)[0]
    assert "--toy-depth TEXT" in text and "Mode toy: how deep it looks." in text
    assert "--knn [exact|hnsw]" in text  # the product's modes' option, declared in modes/hybrid.py


def test_the_toy_mode_has_its_readiness_line_on_either_engine(toy):
    lines = provision._mode_lines(ELASTICSEARCH, meta(), {"bm25": "ep"}, None, {}, "no")
    assert "mode toy: unavailable (the index records no toy parameters)" in lines
    assert "mode hybrid-rrf: ready" in lines  # the Elasticsearch list once left it out
    lines = provision._opensearch_mode_lines(OPENSEARCH, meta(params={"toy": {}}), "p")
    assert "mode toy: ready" in lines


def test_the_toy_mode_has_its_row_in_the_docs_table(toy):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "hooks"))
    try:
        import modes as docs_modes
    finally:
        sys.path.pop(0)
    assert "| `toy` | the toy client | any version, any licence | any version, any licence | `fused` |" in \
        docs_modes.render().splitlines()


def test_make_mode_builds_the_toy_by_its_rule_and_option(toy):
    stage = ElasticsearchFirstStage(None, "idx", "bm25", lambda q: q.title.split())
    options: dict[str, Any] = {"window": 100, "sidecar": SidecarTarget("http://s:1", None, 1.0),
                               "cluster": ELASTICSEARCH}
    with pytest.raises(UserError, match="^the index records no toy parameters$"):
        make_mode("toy", stage, meta(), **options)
    built = make_mode("toy", stage, meta(params={"toy": {}}), extra={"toy_depth": "7"}, **options)
    assert isinstance(built, ToyMode) and built.depth == 7
    assert toy.unavailable(OPENSEARCH, meta(params={"toy": {}})) is None


def test_open_mode_takes_a_modes_option_by_its_dest_and_refuses_an_undeclared_one(toy):
    """``open_mode(..., knn=...)`` and ``toy_depth=...`` are the modes' own options; a keyword no mode
    declares fails before the cluster is asked anything, as a misspelt keyword does."""
    target = SidecarTarget("http://s:1", None, 1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'toy_deep'"):
        open_mode(None, "idx", "toy", "bm25", window=10, sidecar=target, toy_deep=3)
