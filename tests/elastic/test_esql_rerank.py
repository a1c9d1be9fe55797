"""ES|QL ``RERANK`` through the product's rerank endpoint (docs/elasticsearch.md, "ES|QL ``RERANK``").

No network and no Elasticsearch: what the docs' queries rely on is restated from Elasticsearch's source,
in our own words, each piece under the file and commit it was read from. From elastic/elasticsearch:

- The syntax (``tests/elastic/esql_rerank_syntax.py``, a hand-written scanner and reader whose every rule
  says in its docstring what it accepts and where that was read): a release build takes ``RERANK``, an
  optional ``<column> =`` for the score, the query (a constant), ``ON``, one or more comma-separated fields
  (each an optional ``<name> =`` and a column) and an optional ``WITH`` and ``{ "<key>": <constant>, ... }``
  map; keywords in any case; string literals in double or triple double quotes; bare and backquoted names;
  ``?``, ``?name``, ``?1`` and ``??name`` parameters. Read from ``EsqlBaseParser.g4`` @
  d554ad564669530da10ceee6d199afecb7da23d5 (the command, with no development-only alternative),
  ``parser/Expression.g4`` @ 00d1e4276e1489acb15dabd8f4c751f1f5d386a8 (maps and constants),
  ``lexer/Expression.g4`` @ 676c3e985a541a68db6676787a5088734eb6b47e (the tokens; ``rerank`` is a release
  keyword, as ``EsqlBaseLexer.tokens`` @ d554ad56 confirms) and ``EsqlBaseLexer.g4`` @ d554ad56 (case is
  ignored; blanks and comments), all under ``x-pack/plugin/esql/src/main/antlr/``. The checker narrows a
  field's value, any boolean expression there, to a column name.
- Semantics (``implementation.txt``): ``LogicalPlanBuilder.java`` @ d554ad56 takes the options
  ``inference_id`` (a string) and ``timeout`` and refuses any other; ``Rerank.java`` @ e3e97923
  (``taskType()`` is ``TaskType.RERANK``; the query must be a string constant; without ``inference_id``
  the endpoint is ``.rerank-v1-elasticsearch``); ``Analyzer.java`` @ 1c858c6e refuses an endpoint whose task
  type is not the plan's; ``InferenceSettings.java`` @ 0b35c3a6 (``esql.command.rerank.limit`` = 1000);
  ``RowLimited.java`` @ 56c1a1e4 (that limit is a ``LIMIT`` on RERANK's input); ``RerankOperator.java`` @
  0a6ef3f8 (20 rows a request); ``InferenceAction.java`` @ 65a282da (30 s request timeout).

From elastic/elasticsearch-specification @ 9d9b9a521cc1070c1c9eb6c77d91c3a5fb09730d
(``specification.txt``): ``inference/put_custom/PutCustomRequest.ts`` (``PUT
/_inference/{task_type}/{custom_inference_id}``, body ``service``, ``service_settings`` and optional
``chunking_settings``, ``task_settings``), ``inference/_types/CommonTypes.ts`` (``CustomTaskType``
includes ``rerank``; the ``CustomServiceSettings`` shape, from ``tests/tools/es_spec_shapes.json`` at the
same commit) and ``esql/query/QueryRequest.ts`` (``POST /_query`` with ``query`` and ``params``, named
parameters one key each).

What is checked: the docs' queries (found by their ``<!-- esql-rerank:... -->`` markers) parse with the
checker and pass its semantic checks; old or wrong forms are refused; the endpoint ids are ``es setup``'s
(``setup.inference_id``) and the endpoint ``es setup`` PUTs is a ``custom`` one of task type ``rerank``;
the second endpoint's body is the product's with only the URL changed; the docs' Python runs against a
recording client; and the real sidecar, asked in ``RERANK``'s batches on SemEval dev windows, gives the
orders the docs claim for each endpoint.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest
from esql_rerank_syntax import RULES, EsqlError, Rerank, read_rerank, string_value
from sidecar_apps import in_process_apps

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic import mappings, setup
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo
from es_plugin_bridge.elastic.mappings import RERANK_FIELD
from es_plugin_bridge.elastic.modes.vectors import basic_query_weight
from es_plugin_bridge.elastic.setup import RERANK_REQUEST, RERANK_RESPONSE, inference_endpoint, inference_id
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.text.sidecar_text import rerank_text

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data" / "esql_rerank"
DOCS = ROOT / "docs" / "elasticsearch.md"
SPEC_SHAPES = json.loads((ROOT / "tests" / "tools" / "es_spec_shapes.json").read_text(encoding="utf-8"))
SAMPLES = ROOT / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
COMMIT = re.compile(r"[0-9a-f]{40}")


# -- the restated sources --------------------------------------------------------------------------------

def facts(name: str) -> dict[str, str]:
    """``key = value`` lines of a data file (comments and ``@source`` headers skipped)."""
    out = {}
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        if line.startswith(("#", "@")) or "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        out[key] = value
    return out


def sources(name: str) -> list[tuple[str, str]]:
    """Every ``@source`` header of a data file: (path, commit)."""
    found = []
    for line in (DATA / name).read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"@source (\S+) @ (\S+)", line.strip())
        if match:
            found.append((match.group(1), match.group(2)))
    return found


IMPL = facts("implementation.txt")
SPEC = facts("specification.txt")


def parse_rerank(command: str) -> Rerank:
    """``command`` read by ``esql_rerank_syntax`` (what a release build parses), then the checks
    Elasticsearch makes once it has parsed a RERANK command.

    - The query must be a string literal or a single ``?`` parameter (``query_must_be`` in
      ``implementation.txt``: ``Rerank.java`` @ e3e9792330fbbbe0af8371abab26c34c397ce3f0 refuses any other
      constant as not a valid string).
    - The ``WITH`` map may only have the keys of ``options`` in ``implementation.txt``, each with a string
      literal as its value (``LogicalPlanBuilder.java`` @ d554ad564669530da10ceee6d199afecb7da23d5 refuses
      other keys, and an ``inference_id`` or ``timeout`` that is not a string).
    """
    rerank = read_rerank(command)
    if rerank.query.kind not in ("string", "parameter"):
        raise EsqlError(f"query must be a valid string in RERANK, found [{rerank.query.text}]")
    for key, value in rerank.options.items():
        if key not in IMPL["options"].split():
            raise EsqlError(f"Invalid option [{key}] in RERANK, expected one of [{IMPL['options']}]")
        if value.kind != "string":
            raise EsqlError(f"Option [{key}] must be a valid string, found [{value.text}]")
    return rerank


def option(rerank: Rerank, key: str) -> str:
    """The string an option of the ``WITH`` map holds, escapes resolved."""
    return string_value(rerank.options[key].tokens[0])


# -- the docs ----------------------------------------------------------------------------------------------

SECTION = DOCS.read_text(encoding="utf-8").split("## ES|QL `RERANK`", 1)[1].split("\n## ", 1)[0]


def block(name: str) -> str:
    """The fenced block right after ``<!-- esql-rerank:NAME -->`` in the docs' ES|QL section."""
    match = re.search(rf"<!-- esql-rerank:{name} -->\n```[a-z]*\n(.*?)\n```", SECTION, re.S)
    assert match, f"docs/elasticsearch.md has no block marked esql-rerank:{name}"
    return match.group(1)


def commands(query: str) -> list[str]:
    """The commands of an ES|QL query: split at ``|`` outside strings and quoted identifiers."""
    parts, current, quote = [], [], None
    for char in query:
        if quote:
            quote = None if char == quote else quote
        elif char in '"`':
            quote = char
        elif char == "|":
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    parts.append("".join(current).strip())
    return parts


def rerank_of(query: str) -> tuple[int, Rerank]:
    found = [(n, c) for n, c in enumerate(commands(query)) if c.split()[0].lower() == "rerank"]
    assert len(found) == 1, query
    return found[0][0], parse_rerank(found[0][1])


def parameters(text: str) -> set[str]:
    return set(re.findall(r"\?([A-Za-z_]\w*)", text))


def put_request(name: str) -> tuple[str, str, dict[str, Any]]:
    """The docs' ``PUT path`` + JSON body block: (method, path, body)."""
    first, _, body = block(name).partition("\n")
    method, path = first.split()
    return method, path, json.loads(body)


def probability_endpoint_id() -> str:
    return put_request("endpoint")[1].rstrip("/").rsplit("/", 1)[1]


# -- the checker and the checks refuse what Elasticsearch refuses -------------------------------------------

SOURCE = re.compile(r"``(x-pack/[^`]+\.(?:g4|tokens))`` @\s+([0-9a-f]{40})")


def test_each_restated_piece_names_its_file_and_commit():
    for name in ("implementation.txt", "specification.txt"):
        found = sources(name)
        assert found, name
        for path, commit in found:
            assert COMMIT.fullmatch(commit), (name, path, commit)
            assert not path.startswith("/") and "." in path.rsplit("/", 1)[-1], (name, path)


def test_each_rule_of_the_checker_says_what_it_checks_and_where_that_was_read():
    cited = set()
    for rule in RULES:
        doc = rule.__doc__ or ""
        found = SOURCE.findall(doc)
        assert found, f"{rule.__qualname__} cites no file @ commit"
        assert len(" ".join(doc.split())) > 150, f"{rule.__qualname__}: say what it accepts"
        cited |= set(found)
    grammar = "x-pack/plugin/esql/src/main/antlr/"
    assert cited >= {
        (grammar + "EsqlBaseParser.g4", "d554ad564669530da10ceee6d199afecb7da23d5"),
        (grammar + "parser/Expression.g4", "00d1e4276e1489acb15dabd8f4c751f1f5d386a8"),
        (grammar + "lexer/Expression.g4", "676c3e985a541a68db6676787a5088734eb6b47e"),
        (grammar + "EsqlBaseLexer.g4", "d554ad564669530da10ceee6d199afecb7da23d5"),
        (grammar + "EsqlBaseLexer.tokens", "d554ad564669530da10ceee6d199afecb7da23d5"),
    }


@pytest.mark.parametrize("command", [
    # The docs' worked queries and Elasticsearch's own documentation examples.
    'RERANK rest = ?query ON rerank_text WITH { "inference_id": "esrerank-esrerank-questions-bm25" }',
    'RERANK "search query" ON title WITH { "inference_id" : "my_rerank_endpoint" }',
    'rerank rerank_score = "hobbit" ON description, author WITH { "inference_id" : "test_reranker" }',
    'RERANK "war and peace" ON title WITH { "inference_id": "test_reranker", "timeout": "30s" }',
    'RERANK """say "hi" """ ON `rerank_text` WITH {"inference_id": "x"} // a comment',
    'RERANK ?1 ON rerank_text',
    # Forms the checker reads as Elasticsearch's grammar does (see esql_rerank_syntax.py).
    'rerank ?? = ?query on a.b, x = `weird``name` with {}',
    'RERANK score = "q" ON @timestamp, rerank_text /* a /* nested */ comment */ WITH {"timeout": "5s"}',
    'RERANK """ends in a quote""""" ON `by`',
    'RERANK ?query ON rerank_text WITH { "inference_id": "a\\"b" }',
])
def test_the_rerank_rule_accepts_the_documented_forms(command):
    parse_rerank(command)


@pytest.mark.parametrize("command, why", [
    ('RERANK "q" ON rerank_text WITH esrerank-esrerank-questions-bm25', "the endpoint id bare, not in a map"),
    ('RERANK "q" ON rerank_text WITH inference_id = "x"', "an assignment, not a map"),
    ('RERANK "q" rerank_text WITH { "inference_id": "x" }', "no ON"),
    ('RERANK "q" ON WITH { "inference_id": "x" }', "no field"),
    ('RERANK ON rerank_text WITH { "inference_id": "x" }', "no query"),
    ('RERANK "q" ON rerank_text WITH { "inference_id": "x" } AS rest', "AS for the column"),
    ('rest = RERANK "q" ON rerank_text WITH { "inference_id": "x" }', "the column before RERANK"),
    ('RERANK "q" ON rerank_text WITH { inference_id: "x" }', "an unquoted key"),
    ('RERANK "q" ON rerank_text WITH { "inference_id": "x" ', "an unclosed map"),
    ('RERANK "q" ON rerank_text WITH { "inferenceId": "x" }', "an option RERANK does not take"),
    ('RERANK "q" ON rerank_text WITH { "inference_id": 42 }', "an endpoint id that is not a string"),
    ('RERANK 42 ON rerank_text WITH { "inference_id": "x" }', "a query that is not a string"),
    ('RERANK "q\' ON rerank_text', "an unterminated string"),
    ('RERANKS "q" ON rerank_text', "another command"),
    ('RERANK rest = = ?query ON rerank_text', "two ="),
    ('RERANK "q" ON by', "a keyword for a column"),
    ('RERANK ??query ON rerank_text', "a double parameter for the query"),
    ('RERANK "q" ON rerank_text, WITH { "inference_id": "x" }', "a comma and no field"),
    ('RERANK "q" ON rerank_text | LIMIT 10', "the next command"),
])
def test_wrong_rerank_commands_are_refused(command, why):
    with pytest.raises(EsqlError):
        parse_rerank(command)


@pytest.mark.parametrize("value, kind", [
    ("null", "null"), ("true", "boolean"), ("-1", "number"), ("2.5e3", "number"), ("1 day", "quantity"),
    ("?id", "parameter"), ("[1, -2.5]", "list"), ("[true, false]", "list"), ('["a", "b"]', "list"),
    ('"""x"""', "string"), ("[1, true]", None), ("[]", None), ("??id", None), ("1.5 day", None),
    ("endpoint", None),
])
def test_a_map_value_is_any_constant_and_the_checks_then_want_a_string(value, kind):
    command = f'RERANK "q" ON rerank_text WITH {{ "inference_id": {value} }}'
    if kind is None:
        with pytest.raises(EsqlError, match="expected"):
            read_rerank(command)
        return
    assert read_rerank(command).options["inference_id"].kind == kind
    if kind == "string":
        assert option(parse_rerank(command), "inference_id") == "x"
    else:
        with pytest.raises(EsqlError, match=r"Option \[inference_id\] must be a valid string"):
            parse_rerank(command)


def test_strings_and_names_read_as_written():
    rerank = parse_rerank('RERANK `my``col` = "a\\tb\\"c" ON t = title WITH { "timeout": """5"s""""" }')
    assert rerank.column == "my`col"
    assert string_value(rerank.query.tokens[0]) == 'a\tb"c'
    assert rerank.fields == ("t = title",)
    assert option(rerank, "timeout") == '5"s""'


# -- the docs' queries --------------------------------------------------------------------------------------

def check_window(cmds: list[str], index: str, first_stage: str = "bm25") -> int:
    """FROM the index with _score, MATCH on the first stage's field, SORT by _score, LIMIT n: the window."""
    assert re.fullmatch(rf"FROM {re.escape(index)} METADATA _score", cmds[0]), cmds[0]
    assert cmds[1] == f"WHERE MATCH({mappings.FIELDS[first_stage]}, ?tokens)", cmds[1]
    assert cmds[2] == "SORT _score DESC", cmds[2]
    limit = re.fullmatch(r"LIMIT (\d+)", cmds[3])
    assert limit, cmds[3]
    return int(limit.group(1))


def check_rerank(query: str, endpoint: str) -> Rerank:
    """The window, then RERANK of ``rerank_text`` with ``endpoint``, then a SORT that puts nulls last."""
    cmds = commands(query)
    index = cmds[0].split()[1]
    window = check_window(cmds, index)
    at, rerank = rerank_of(query)
    assert at == 4, "RERANK right after the window"
    # Every row of the window reaches RERANK: the window is within its row limit (9.3+).
    assert window <= int(IMPL["setting.row_limit.default"])
    assert rerank.query.text == "?query"
    assert rerank.fields == (RERANK_FIELD,), "one field: its value is what the sidecar reads"
    properties = mappings.index_body(dimension=8)["mappings"]["properties"]
    assert properties[RERANK_FIELD]["type"] == "text"
    assert option(rerank, "inference_id") == endpoint
    sort = next(c for c in cmds[at + 1:] if c.startswith("SORT"))
    assert sort.endswith("DESC NULLS LAST"), sort
    return rerank


def test_the_worked_query_reranks_the_window_with_the_endpoint_es_setup_names():
    index = commands(block("fused"))[0].split()[1]
    rerank = check_rerank(block("fused"), inference_id(index, "bm25"))
    assert index == "esrerank-questions" and inference_id(index, "bm25") == "esrerank-esrerank-questions-bm25"
    cmds = commands(block("fused"))
    # The score goes into its own column and BM25's share is added back, then the rows sort by the sum.
    assert rerank.column == "rest"
    assert cmds[5] == "EVAL fused = ?w * _score + rest"
    assert cmds[6] == "SORT fused DESC NULLS LAST"
    # The range query reads the same window.
    window = commands(block("window"))
    assert window[:4] == cmds[:4]
    assert window[4:] == ["STATS hi = MAX(_score), lo = MIN(_score)"]
    assert parameters(block("window")) == {"tokens"}
    assert parameters(block("fused")) == {"tokens", "query", "w"}


def test_the_one_query_form_uses_the_second_endpoint_and_replaces_score():
    rerank = check_rerank(block("probability"), probability_endpoint_id())
    assert rerank.column == "_score"
    assert "SORT _score DESC NULLS LAST" in commands(block("probability"))
    assert parameters(block("probability")) == {"tokens", "query"}


def test_a_query_naming_another_endpoint_or_none_fails_the_checks():
    fused = block("fused")
    other = fused.replace("esrerank-esrerank-questions-bm25", "esrerank-esrerank-questions-embed")
    with pytest.raises(AssertionError):
        check_rerank(other, inference_id("esrerank-questions", "bm25"))
    bare = fused.replace(' WITH { "inference_id": "esrerank-esrerank-questions-bm25" }', "")
    parse_rerank(commands(bare)[4])  # valid ES|QL, but Elasticsearch's own endpoint would rerank:
    assert IMPL["default_inference_id"] == ".rerank-v1-elasticsearch"
    with pytest.raises(KeyError):
        check_rerank(bare, inference_id("esrerank-questions", "bm25"))
    two_fields = fused.replace("ON rerank_text", "ON title, body")
    with pytest.raises(AssertionError):
        check_rerank(two_fields, inference_id("esrerank-questions", "bm25"))


# -- the endpoints -------------------------------------------------------------------------------------------

def conforms(body: dict[str, Any], cls: str) -> None:
    shape = SPEC_SHAPES["classes"][cls]
    assert set(body) <= set(shape["fields"]), f"{cls}: unknown {sorted(set(body) - set(shape['fields']))}"
    assert set(shape["required"]) <= set(body), f"{cls}: missing {sorted(set(shape['required']) - set(body))}"


def put_custom_conforms(method: str, path: str, body: dict[str, Any]) -> str:
    """``path`` and ``body`` are a ``put_custom`` request; returns its task type."""
    assert method == SPEC["put_custom.method"]
    template = SPEC["put_custom.path"].replace("{task_type}", "(?P<task>[^/]+)")
    template = template.replace("{custom_inference_id}", "(?P<id>[^/]+)")
    match = re.fullmatch(template, "/" + path.lstrip("/"))
    assert match, path
    assert setup.VALID_ID.fullmatch(match.group("id")), "MlStrings.isValidId"
    fields = SPEC["put_custom.body"].split()
    assert set(body) <= {f.rstrip("?") for f in fields}
    assert {f for f in fields if not f.endswith("?")} <= set(body)
    assert body["service"] in SPEC["CustomServiceType"].split()
    conforms(body["service_settings"], "CustomServiceSettings")
    conforms(body["service_settings"]["response"], "CustomResponseParams")
    assert match.group("task") in SPEC["CustomTaskType"].split()
    return match.group("task")


def esql_accepts_endpoint(task_type: str) -> bool:
    """``Analyzer.ResolveInference``: the endpoint's task type must be the RERANK plan's."""
    return task_type == IMPL["task_type"]


class RecordingInference:
    def __init__(self) -> None:
        self.puts: list[dict[str, Any]] = []

    def get(self, **_: Any) -> Any:
        return SimpleNamespace(meta=SimpleNamespace(status=404))

    def delete(self, **_: Any) -> None:
        raise AssertionError("nothing to delete")

    def put(self, **kwargs: Any) -> None:
        self.puts.append(kwargs)


class RecordingClient:
    def __init__(self) -> None:
        self.inference = RecordingInference()

    def options(self, **_: Any) -> RecordingClient:
        return self


def test_es_setup_puts_a_custom_rerank_endpoint_that_esql_accepts():
    client = RecordingClient()
    beta = {"first_stage": 0.3, "bow": 0.2, "neural": 0.5}
    meta = setup.IndexMeta(model="m", model_type="bow-cnn", dimension=8, neural_similarity="cosine",
                           fusion={"bm25": beta, "lmdirichlet": beta}, text={})
    cluster = ClusterInfo((9, 1, 0), "trial", True)  # a licence and version that run mode native
    ids, why_not = setup.register_endpoints(client, "esrerank-questions", meta, "http://sidecar:8080",
                                            "s3cret", cluster)
    assert why_not is None
    assert ids["bm25"] == inference_id("esrerank-questions", "bm25")
    assert option(rerank_of(block("fused"))[1], "inference_id") == ids["bm25"]
    for put in client.inference.puts:
        path = f"/_inference/{put['task_type']}/{put['inference_id']}"
        task = put_custom_conforms("PUT", path, put["inference_config"])
        assert task == "rerank" and esql_accepts_endpoint(task)
    assert [p["inference_id"] for p in client.inference.puts] == [ids["bm25"], ids["lmdirichlet"]]
    # An embedding endpoint (es setup's text_embedding/sparse_embedding ones) would be refused.
    assert not esql_accepts_endpoint("text_embedding") and not esql_accepts_endpoint("sparse_embedding")


def test_the_second_endpoint_is_the_products_body_without_score_linear():
    method, path, body = put_request("endpoint")
    assert put_custom_conforms(method, path, body) == "rerank"
    assert probability_endpoint_id() == inference_id("esrerank-questions", "probability")
    url = urlsplit(body["service_settings"]["url"])
    assert url.path == "/v1/rerank" and url.query == "", "no score=linear, no first_stage"
    product = inference_endpoint("http://HOST:8080", "bm25", "the sidecar's token")
    assert product["service_settings"]["url"] == "http://HOST:8080/v1/rerank?score=linear&first_stage=bm25"
    product["service_settings"]["url"] = body["service_settings"]["url"]
    assert body == product
    assert body["service_settings"]["request"] == RERANK_REQUEST
    assert body["service_settings"]["response"]["json_parser"] == RERANK_RESPONSE


# -- the docs' Python ----------------------------------------------------------------------------------------

class EsqlRecorder:
    def __init__(self, window: tuple[float, float]) -> None:
        self.window = window
        self.calls: list[dict[str, Any]] = []

    def query(self, **body: Any) -> dict[str, Any]:
        self.calls.append(body)
        if len(self.calls) == 1:
            return {"columns": [{"name": "hi"}, {"name": "lo"}], "values": [list(self.window)]}
        return {"columns": [], "values": []}


class MappingAnswer(dict):
    meta = SimpleNamespace(status=200)


def test_the_python_sends_each_query_its_parameters():
    beta = {"first_stage": 0.35, "bow": 0.15, "neural": 0.5}
    meta = setup.IndexMeta(model="m", model_type="bow-cnn", dimension=8, neural_similarity="cosine",
                           fusion={"bm25": beta}, text=TextOptions().model_dump())
    mapping = MappingAnswer({"esrerank-questions": {"mappings": {"_meta": {setup.META_KEY: meta.as_dict()}}}})
    esql = EsqlRecorder((12.5, 2.5))
    client = SimpleNamespace(esql=esql, indices=SimpleNamespace(get_mapping=lambda **_: mapping))
    client.options = lambda **_: client
    scope = {"client": client, "WINDOW": block("window"), "FUSED": block("fused")}
    exec(compile(block("python"), "docs/elasticsearch.md", "exec"), scope)  # the docs' code, as written

    (window, fused) = esql.calls
    for call, query in ((window, block("window")), (fused, block("fused"))):
        assert set(call) <= {f.rstrip("?") for f in SPEC["esql_query.body"].split()}
        assert call["query"] == query
        assert all(len(p) == 1 for p in call["params"]), "named parameters: one key each"
        assert {k for p in call["params"] for k in p} == parameters(query)
    sent = {k: v for p in fused["params"] for k, v in p.items()}
    question = Question("", "how do I upgrade to 12.04", "")
    assert sent["tokens"] == " ".join(Preprocessor(TextOptions()).tokens(question))  # what `text` holds
    assert sent["tokens"] != question.title
    assert sent["query"] == rerank_text(question)
    assert sent["w"] == pytest.approx(0.35 / 10.0) == basic_query_weight(0.35, [12.5, 2.5])


# -- what the docs say, from the restated facts -------------------------------------------------------------

def test_the_section_states_the_sources_numbers():
    section = " ".join(SECTION.split())
    for fact in (f"`{IMPL['setting.row_limit']}` (default {IMPL['setting.row_limit.default']}",
                 f"`{IMPL['setting.enabled']}: false`",
                 f"`{IMPL['default_inference_id']}`",
                 f"default timeout, {IMPL['request_timeout_seconds']} s",
                 f"{IMPL['batch_size']} in the sources read",
                 f"from Elasticsearch {IMPL['first_release']}",
                 f"from {IMPL['row_limit_since']} the dynamic cluster setting",
                 '"timeout": "5s"',
                 "task type [rerank]"):
        assert fact in section, fact
    assert IMPL["dev_only_before"] == IMPL["first_release"]


# -- the sidecar, asked as RERANK asks it -------------------------------------------------------------------

@pytest.fixture(scope="module")
def semeval():
    from es_plugin_bridge.data.spec import read_spec

    return read_spec(f"semeval:{SEMEVAL_DEV}").queries


@pytest.fixture(scope="module")
def apps(exported):
    return in_process_apps(exported)


def rerank_in_batches(client: Any, url: str, query: str, docs: list[str], batch: int) -> np.ndarray:
    """What RERANK puts in its column: the window sent ``batch`` rows a request, each row given the
    ``relevance_score`` of its ``index`` (``RerankOperatorOutputBuilder``)."""
    scores = np.zeros(len(docs))
    for start in range(0, len(docs), batch):
        part = docs[start:start + batch]
        resp = client.post(url, json={"query": query, "documents": part})
        assert resp.status_code == 200, resp.json
        for result in sorted(resp.json["results"], key=lambda r: r["index"]):
            scores[start + result["index"]] = result["relevance_score"]
    return scores


def reference(client: Any, query: str, docs: list[str], first_stage: list[float]) -> dict[str, np.ndarray]:
    """The product's own ``fused`` and ``model`` scores (the bridge's request, with ``explain``)."""
    body = {"query": query, "documents": docs, "first_stage_scores": first_stage, "first_stage": "bm25",
            "explain": True}
    resp = client.post("/v1/rerank", json=body)
    assert resp.status_code == 200, resp.json
    out = {name: np.zeros(len(docs)) for name in ("fused", "model")}
    for result in resp.json["results"]:
        for name in out:
            out[name][result["index"]] = result["explain"][name]
    return out


def order(scores: np.ndarray) -> list[int]:
    return np.argsort(-scores, kind="stable").tolist()


BATCHES = (int(IMPL["batch_size"]), 3)  # RerankOperator's, and one that splits a SemEval window


@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
def test_the_products_endpoint_plus_the_window_weight_orders_as_fused(model_type, apps, semeval):
    client, service = apps[model_type]
    beta_fs = service.model.fusion["bm25"]["first_stage"]
    differs = 0
    for rq in semeval:
        query, docs = rerank_text(rq.query), [rerank_text(c) for c in rq.candidates]
        fs = [float(s) for s in rq.first_stage_scores]
        ref = reference(client, query, docs, fs)
        rests = [rerank_in_batches(client, "/v1/rerank?score=linear&first_stage=bm25", query, docs, b)
                 for b in (len(docs), *BATCHES)]
        for rest in rests[1:]:
            np.testing.assert_array_equal(rest, rests[0])  # the batch RERANK uses changes nothing
        rest = rests[0]
        assert (rest >= 0).all()
        w = basic_query_weight(beta_fs, fs)  # the docs' ?w from the window query's hi and lo
        assert order(w * np.asarray(fs) + rest) == order(ref["fused"])
        differs += order(rest) != order(ref["fused"])
    # RERANK alone with this endpoint drops BM25's share: another order as soon as β_fs counts.
    assert beta_fs > 0 and differs > 0, (beta_fs, differs)


@pytest.mark.parametrize("model_type", ["bow-cnn", "gru"])
def test_the_second_endpoint_answers_probabilities_in_the_model_order(model_type, apps, semeval):
    client, _ = apps[model_type]
    for rq in semeval:
        query, docs = rerank_text(rq.query), [rerank_text(c) for c in rq.candidates]
        ref = reference(client, query, docs, [float(s) for s in rq.first_stage_scores])
        answers = [rerank_in_batches(client, "/v1/rerank", query, docs, b) for b in (len(docs), *BATCHES)]
        for answer in answers[1:]:
            np.testing.assert_array_equal(answer, answers[0])
        assert ((answers[0] >= 0) & (answers[0] <= 1)).all()
        assert order(answers[0]) == order(ref["model"])


def test_the_second_endpoint_must_not_name_a_first_stage(apps, semeval):
    client, _ = apps["bow-cnn"]
    rq = semeval[0]
    resp = client.post("/v1/rerank?first_stage=bm25",
                       json={"query": rerank_text(rq.query), "documents": [rerank_text(rq.candidates[0])]})
    assert resp.status_code == 400 and resp.json["field"] == "first_stage"
