"""Engines are plug-ins: the registry names them, the CLI offers what it holds, and an engine registered
anywhere (here a test's own) is built and chosen by name with no other file touched."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import pytest

from es_plugin_bridge.bridge import BridgeSearch
from es_plugin_bridge.cli.es_evaluate import es_evaluate
from es_plugin_bridge.cli.evaluate import evaluate
from es_plugin_bridge.cli.search import search_command
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.results_index import results_documents
from es_plugin_bridge.engines import registry
from es_plugin_bridge.engines.base import Engine, FirstStage
from es_plugin_bridge.engines.embedded import EmbeddedEngine, EmbeddedFirstStage
from es_plugin_bridge.engines.registry import (
    EngineContext,
    build_engine,
    default_engine,
    engine_info,
    engine_names,
    register_engine,
)
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.rankers import RankerContext, TokenCache
from es_plugin_bridge.text import Preprocessor

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "es_plugin_bridge"
SAMPLES = PACKAGE / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
VAL = SAMPLES / "askubuntu-pairs" / "val.tsv"
HEAVY = ("torch", "scipy", "elasticsearch", "sklearn", "gensim", "matplotlib")


def engine_param(command: click.Command) -> click.Option:
    return next(p for p in command.params if p.name == "engine")  # type: ignore[return-value]


class ToyEngine:
    """This test's own engine: the embedded engine's answers, with a record of what it was asked."""

    name = "toy"

    def __init__(self, context: EngineContext) -> None:
        assert context.tokens is not None
        self.context = context
        self.inner = EmbeddedEngine(context.tokens)
        self.indexed: list[str] = []
        self.stages: list[str] = []

    def index(self, questions: Sequence[Question]) -> None:
        self.indexed.extend(q.id for q in questions)
        self.inner.index(questions)

    def first_stage(self, similarity: str, params: Mapping[str, float] | None = None) -> FirstStage:
        self.stages.append(similarity)
        return self.inner.first_stage(similarity, params)


@contextmanager
def toy_registered() -> Iterator[list[ToyEngine]]:
    """``toy`` registered the way an engine's module does it, and gone again on the way out."""
    built: list[ToyEngine] = []
    engine_names()  # discover first, so that the copy put back afterwards holds every engine
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "_REGISTRY", registry._REGISTRY.copy())

        @register_engine("toy", description="a test's engine")
        def toy(context: EngineContext) -> ToyEngine:
            built.append(ToyEngine(context))
            return built[-1]

        yield built


@contextmanager
def elasticsearch_replaced() -> Iterator[list[EngineContext]]:
    """The ``elasticsearch`` entry with its factory swapped for one that records its context and answers
    with the embedded engine: what the CLI hands a remote engine, without a cluster."""
    seen: list[EngineContext] = []

    def fake(context: EngineContext) -> Engine:
        seen.append(context)
        engine = EmbeddedEngine(context.tokens or Preprocessor().tokens)
        if context.cleanup is None:  # an existing index: it holds its questions already
            engine.index([Question("forum-1", "How do I install Ubuntu?")])
        return engine

    entry = engine_info("elasticsearch")
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(registry._REGISTRY, "elasticsearch", replace(entry, factory=fake))
        yield seen


def test_every_registered_engine_is_a_choice_of_the_cli():
    names = engine_names()
    assert {"embedded", "elasticsearch"} <= set(names)
    for command in (search_command, evaluate):
        option = engine_param(command)
        assert list(option.type.choices) == names  # type: ignore[attr-defined]
        assert option.default == default_engine()
    assert "engine" not in {p.name for p in es_evaluate.params}  # es evaluate is the elasticsearch engine


def test_help_lists_the_engines_in_the_registrys_order(cli):
    for argv in (["search", "--help"], ["evaluate", "--help"]):
        code, out, _ = cli(argv)
        assert code == 0
        assert f"--engine [{'|'.join(engine_names())}]" in out
        assert "[default: embedded]" in " ".join(out.split())


def test_the_default_engine_is_the_embedded_one():
    assert default_engine() == "embedded" == engine_names()[0]
    assert engine_info("embedded").default and not engine_info("embedded").remote
    assert [name for name in engine_names() if engine_info(name).default] == ["embedded"]
    questions = [Question("a", "install ubuntu from usb"), Question("b", "wifi drops on resume")]
    # Rankers and the bridge take the registry's default when no engine is given.
    context = RankerContext(collection=questions, tokens=TokenCache(Preprocessor()))
    assert isinstance(context.first_stage("bm25"), EmbeddedFirstStage)
    assert isinstance(context.engine, EmbeddedEngine)
    assert isinstance(BridgeSearch(questions, None).first_stage, EmbeddedFirstStage)


def test_an_unknown_engine_is_a_user_error_naming_the_known_ones():
    for attempt in (lambda: build_engine("solr"), lambda: engine_info("solr")):
        with pytest.raises(UserError, match="unknown engine 'solr'") as caught:
            attempt()
        assert "(known: embedded, elasticsearch" in str(caught.value)
    with pytest.raises(UserError, match=r"engine 'solr' is not one of embedded, elasticsearch"):
        results_documents(None, run_id="r", dataset="d", engine="solr", mode="none")  # type: ignore[arg-type]


def test_registering_a_name_twice_or_a_second_default_is_refused():
    with toy_registered():
        with pytest.raises(ValueError, match="registered twice"):
            register_engine("toy", "somewhere:else")
        with pytest.raises(ValueError, match="already the default"):
            register_engine("other", "somewhere:else", default=True)


def test_a_toy_engine_is_buildable_and_selectable_then_gone(cli, tmp_path):
    with toy_registered() as built:
        assert engine_names()[0] == "embedded" and "toy" in engine_names()
        assert "toy" in engine_param(search_command).type.choices  # type: ignore[attr-defined]
        engine = build_engine("toy", EngineContext(tokens=Preprocessor().tokens))
        assert isinstance(engine, ToyEngine) and isinstance(engine, Engine)

        search = ["search", "install", "ubuntu", "usb", "--corpus", f"pairs:{VAL}", "--json", "--top", "5"]
        code, out, err = cli([*search, "--engine", "toy"])
        assert code == 0, err
        toy_hits = json.loads(out)["hits"]
        assert built[-1].stages == ["bm25"] and len(built[-1].indexed) > 100
        code, out, err = cli(search)
        assert code == 0, err
        assert json.loads(out)["hits"] == toy_hits

        run = ["evaluate", "--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}",
               "--rankers", "bm25,lmdirichlet", "--param", "bm25.k1=1.0", "--no-progress"]
        code, _, err = cli([*run, "--engine", "toy", "--json", str(tmp_path / "toy.json")])
        assert code == 0, err
        assert built[-1].stages == ["bm25", "lmdirichlet"]
        assert built[-1].context.params == {"bm25": {"k1": 1.0}}
        assert built[-1].context.options == {}  # no connection for an engine that is not remote
        code, _, err = cli([*run, "--json", str(tmp_path / "embedded.json")])
        assert code == 0, err
        assert (tmp_path / "toy.json").read_text() == (tmp_path / "embedded.json").read_text()
    assert "toy" not in engine_names()
    assert "toy" not in engine_param(evaluate).type.choices  # type: ignore[attr-defined]
    code, _, err = cli(["search", "q", "--engine", "toy"])
    assert code == 2 and "'toy' is not one of 'embedded', 'elasticsearch'" in err


def test_a_remote_engine_gets_the_connection_and_the_index_from_the_cli(cli, tmp_path):
    with elasticsearch_replaced() as seen:
        code, _, err = cli(["evaluate", "--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--rankers",
                            "bm25", "--param", "bm25.k1=1.0", "--engine", "elasticsearch", "--no-progress",
                            "--es-url", "http://es.example:9200", "--json", str(tmp_path / "es.json")])
        assert code == 0, err
        context = seen[-1]
        assert set(context.options) == {"connection"}
        assert context.options["connection"].url == "http://es.example:9200"
        assert isinstance(context.cleanup, ExitStack) and context.tokens is not None and not context.progress
        assert context.params == {"bm25": {"k1": 1.0}}

        code, out, err = cli(["search", "install", "ubuntu", "--engine", "elasticsearch", "--index", "forum",
                              "--json"])
        assert code == 0, err
        context = seen[-1]
        assert context.options["index"] == "forum" and context.tokens is None and context.cleanup is None
        assert [hit["id"] for hit in json.loads(out)["hits"]] == ["forum-1"]


def test_the_elasticsearch_engine_registers_from_its_own_module_without_loading_elastic():
    code = """
import json, sys
from es_plugin_bridge.engines import registry
import es_plugin_bridge.engines.elastic
alone = sorted(registry._REGISTRY)
entry = registry._REGISTRY["elasticsearch"]
names = registry.engine_names()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[1].split(",")
                or m.startswith("es_plugin_bridge.elastic"))
print(json.dumps({"alone": alone, "factory": entry.factory, "remote": entry.remote, "names": names,
                  "loaded": loaded}))
"""
    out = subprocess.run([sys.executable, "-c", code, ",".join(HEAVY)], capture_output=True, text=True,
                         timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["alone"] == ["elasticsearch"]  # importing that one module registered it
    assert got["factory"] == "es_plugin_bridge.elastic.engine:open_engine" and got["remote"]
    assert got["names"][:2] == ["embedded", "elasticsearch"]
    assert got["loaded"] == []

    from es_plugin_bridge.elastic.engine import open_engine

    assert engine_info("elasticsearch").load() is open_engine


def test_listing_the_engines_for_help_loads_no_heavy_library():
    code = """
import io, json, sys
from contextlib import redirect_stdout
from es_plugin_bridge.cli.main import main
with redirect_stdout(io.StringIO()) as out:
    try:
        main(["search", "--help"])
    except SystemExit:
        pass
print(json.dumps({"help": out.getvalue(), "loaded": sorted({m.split(".")[0] for m in sys.modules}
                  & set(sys.argv[1].split(","))), "elastic": "es_plugin_bridge.elastic" in sys.modules}))
"""
    out = subprocess.run([sys.executable, "-c", code, ",".join(HEAVY)], capture_output=True, text=True,
                         timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "[embedded|elasticsearch|opensearch]" in got["help"]
    assert got["loaded"] == [] and not got["elastic"]


def _engine_names_compared(tree: ast.AST, names: set[str]) -> list[int]:
    """Lines that compare with an engine's name, or list two engine names (a hand-written choice)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in names for o in operands):
                lines.append(node.lineno)
        elif isinstance(node, ast.List | ast.Tuple | ast.Set) and sum(
                isinstance(e, ast.Constant) and e.value in names for e in node.elts) >= 2:
            lines.append(node.lineno)
    return lines


def test_no_module_branches_on_an_engine_name_and_engines_register_in_engines():
    names = set(engine_names())
    registering, branching = {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        relative = path.relative_to(PACKAGE).as_posix()
        if "register_engine(" in text and relative != "engines/registry.py":
            registering[relative] = text.count("register_engine(")
        lines = _engine_names_compared(ast.parse(text), names)
        if lines:
            branching[relative] = lines
    assert registering == {"engines/embedded.py": 1, "engines/elastic.py": 1, "engines/opensearch.py": 1}
    # Two kinds of places name engines by right: connection.py reads which server answers GET / (its
    # version.distribution), and each mode's module declares, in its registry entry, the engines it runs on.
    allowed = {"elastic/cluster/connection.py"}
    entries = {path for path in branching if path.startswith("elastic/modes/")}
    assert {path: lines for path, lines in branching.items() if path not in allowed | entries} == {}


class _Indices:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def delete(self, index: str) -> None:
        self.log.append(("delete", index))
        if index == "refuses":
            raise UserError("cannot delete")


class _Client:
    """What ``open_engine`` asks of a client: ``info`` and deleting the run's index."""

    def __init__(self) -> None:
        self.log: list[Any] = []
        self.indices = _Indices(self.log)

    def info(self) -> dict[str, Any]:
        self.log.append("info")
        return {}

    def options(self, **_: Any) -> _Client:
        return self


class _Connection:
    url = "http://es.example:9200"

    def __init__(self, client: _Client) -> None:
        self._client = client

    def client(self) -> _Client:
        return self._client


def test_elasticsearch_engine_for_a_run_is_a_throw_away_index():
    from es_plugin_bridge.elastic.engine import ElasticsearchEngine

    client, tokens = _Client(), Preprocessor().tokens
    with ExitStack() as stack:
        engine = build_engine("elasticsearch", EngineContext(
            tokens=tokens, params={"bm25": {"k1": 1.0}}, progress=False, cleanup=stack,
            options={"connection": _Connection(client)}))
        assert isinstance(engine, ElasticsearchEngine) and engine.name == "elasticsearch"
        assert engine.index_name.startswith("esrerank-eval-") and engine.params == {"bm25": {"k1": 1.0}}
        assert client.log == ["info"]  # connected, nothing deleted yet
    assert client.log == ["info", ("delete", engine.index_name)]

    client = _Client()
    with ExitStack() as stack:
        build_engine("elasticsearch", EngineContext(tokens=tokens, cleanup=stack, options={
            "connection": _Connection(client), "index": "mine", "keep": True}))
    assert client.log == ["info"]

    client = _Client()  # a failed run reports its own error, not the clean-up's
    with pytest.raises(RuntimeError, match="the run failed"), ExitStack() as stack:
        build_engine("elasticsearch", EngineContext(tokens=tokens, cleanup=stack, options={
            "connection": _Connection(client), "index": "refuses"}))
        raise RuntimeError("the run failed")
    assert client.log == ["info", ("delete", "refuses")]


def test_elasticsearch_engine_opens_an_existing_index(monkeypatch):
    from es_plugin_bridge.elastic import setup
    from es_plugin_bridge.elastic.engine import ElasticsearchFirstStage
    from es_plugin_bridge.text import TextOptions

    client, read = _Client(), []

    class Meta:
        def text_options(self) -> TextOptions:
            return TextOptions(use_body=False)

    monkeypatch.setattr(setup, "read_meta", lambda c, index: read.append((c, index)) or Meta())
    engine = build_engine("elasticsearch", EngineContext(options={"connection": _Connection(client),
                                                                  "index": "forum"}))
    assert read == [(client, "forum")] and client.log == []  # no connection check, nothing deleted
    stage = engine.first_stage("bm25")
    assert isinstance(stage, ElasticsearchFirstStage) and (stage.index, stage.similarity) == ("forum", "bm25")
    question = Question("1", "Installing Ubuntu", "<p>from a stick</p>")
    assert stage.tokens(question) == Preprocessor(TextOptions(use_body=False)).tokens(question)
    theirs = build_engine("elasticsearch", EngineContext(tokens=Preprocessor().tokens, options={
        "client": client, "index": "theirs", "fields": ("doc.title", "doc.text")}))
    assert theirs.first_stage("lmdirichlet").fields == ("doc.title", "doc.text") and len(read) == 1
    with pytest.raises(ValueError, match="no option colour"):
        build_engine("elasticsearch", EngineContext(options={"client": client, "index": "x", "colour": 1}))
    with pytest.raises(UserError, match="needs the name of the index"):
        build_engine("elasticsearch", EngineContext(options={"client": client}))
