"""Property-based fuzzing of the sidecar from its own ``/openapi.json`` (schemathesis): valid and invalid
requests to every operation, at least 1,000 in all, must never answer 5xx and every answer must match the
spec (status documented, body matching its schema, content type), and a request valid against the
document is accepted unless it breaks one of the rules across fields the document states
(``openapi.CROSS_FIELD_RULES``). Both of schemathesis' generating phases run: the coverage phase (what
``st run`` sends first: boundary values, each keyword broken in turn, unexpected methods, duplicate and
missing parameters) and hypothesis' fuzzing, with the settings shipped for ``st run``
(``schemathesis.toml``). In process (WSGI), bounded, seeded."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
import stated_rules
import tomllib
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance
from schemathesis.config import SchemathesisConfig

from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.openapi import CROSS_FIELD_RULES, TEXT_RULE
from es_plugin_bridge.text.pipeline import Preprocessor

#: Cases per operation: valid ones cost a request each; an invalid one first costs schemathesis a negated
#: schema (seconds for the 100,000-character text fields), so fewer of those. With the coverage phase's
#: cases that is still over 1,000 requests (the test below); 300 and 40 took 7 min of CI's 25.
EXAMPLES = {GenerationMode.POSITIVE: 120, GenerationMode.NEGATIVE: 15}
SHIPPED_SETTINGS = Path(__file__).resolve().parents[2] / "schemathesis.toml"


class _Counter:
    """WSGI middleware counting the requests the fuzzer sent, by status class."""

    def __init__(self, app) -> None:
        self.app, self.counts = app, {}

    def __call__(self, environ, start_response):
        def start(status, headers, exc_info=None):
            key = status[0] + "xx"
            self.counts[key] = self.counts.get(key, 0) + 1
            return start_response(status, headers, exc_info)

        return self.app(environ, start)


#: The served model's preprocessor (``fuzzed_app``): whether a document is scored depends on how it reads.
_SERVED: dict[str, Preprocessor] = {}


def breaks_a_stated_rule(case) -> bool:
    """Whether a case breaks one of the document's rules it cannot say in JSON Schema (``stated_rules``):
    such a request is rightly a 400."""
    return stated_rules.breaks_a_stated_rule(case.operation.path, case.body, case.query,
                                             _SERVED["preprocessor"])


def test_the_document_states_the_rules_the_fuzzer_exempts(api_schema):
    description = api_schema.raw_schema["paths"]["/v1/rerank"]["post"]["description"]
    assert len(CROSS_FIELD_RULES) == 5 and all(rule in description for rule in CROSS_FIELD_RULES)
    assert TEXT_RULE in api_schema.raw_schema["info"]["description"]


def test_the_document_is_the_served_model_and_limit(api_schema, exported):
    """first_stage's enum is the model's β names and maxItems its --max-documents: a first stage the model
    has no β for, or one document too many, is invalid in the document as it is refused by the server."""
    fusion = sorted(ModelDirectory.load(exported["bow-cnn"], threads=1).fusion)
    schemas = api_schema.raw_schema["components"]["schemas"]
    assert schemas["RerankRequest"]["properties"]["first_stage"]["anyOf"][0]["enum"] == fusion
    params = api_schema.raw_schema["paths"]["/v1/rerank"]["post"]["parameters"]
    assert next(p for p in params if p["name"] == "first_stage")["schema"]["enum"] == fusion
    for model, field in (("RerankRequest", "documents"), ("RerankV2Request", "documents"),
                         ("EncodeRequest", "texts")):
        assert schemas[model]["properties"][field]["maxItems"] == 50


@pytest.fixture(scope="module")
def counter():
    return {}


@pytest.fixture(scope="module")
def fuzzed_app(exported, counter):
    model = ModelDirectory.load(exported["bow-cnn"], threads=1)
    _SERVED["preprocessor"] = model.preprocessor
    app = create_app(model, max_documents=50)
    app.wsgi_app = wrapped = _Counter(app.wsgi_app)  # type: ignore[method-assign]
    counter["wsgi"] = wrapped
    return app


@pytest.fixture(scope="module")
def api_schema(fuzzed_app):
    # The settings a user's `st run` reads in this repository: schemathesis' defaults, but for 413 as a
    # refusal of one item more than maxItems (how the server refuses a list over --max-documents).
    # Its `hooks` (st_hooks.py) are left out: they keep `st run` from sending a valid case that breaks a
    # stated rule, and here every such case is sent and its 400 asserted (`_validate`).
    shipped = tomllib.loads(SHIPPED_SETTINGS.read_text(encoding="utf-8"))
    config = SchemathesisConfig.from_dict({key: value for key, value in shipped.items() if key != "hooks"})
    return schemathesis.openapi.from_wsgi("/openapi.json", fuzzed_app, config=config)


def _operations(api_schema) -> list:
    return [result.ok() for result in api_schema.get_all_operations()]


def _operation(api_schema, path: str):
    return next(op for op in _operations(api_schema) if op.path == path)


def _coverage(api_schema, operation) -> list:
    """The cases of schemathesis' coverage phase for ``operation``, valid and invalid, as ``st run``
    makes them."""
    return list(api_schema.iter_coverage_cases(
        operation, generation_modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        generation_config=api_schema.config.generation_for(operation=operation)))


def _validate(case) -> None:
    """Every check, "positive data acceptance" included (a valid request must not be a 4xx), but for
    requests that break a rule across fields the document states in words."""
    positive = case.meta.generation.mode == GenerationMode.POSITIVE
    exempt = [positive_data_acceptance] if positive and breaks_a_stated_rule(case) else []
    case.call_and_validate(excluded_checks=exempt)


def test_every_valid_case_of_the_coverage_phase_has_a_valid_body(api_schema):
    """Issue 34, item 14: the coverage phase read the not-blank pattern beside maxLength 100,000 as
    ``^[^…]{1,100000}$``, too large for its regex engine; it then built no valid body for /v1/rerank,
    /v2/rerank or /v1/encode and sent ``0`` in the cases it called valid:
    ``0`` to ``/v1/rerank?score=probability&first_stage=lmdirichlet`` was a "valid request" refused 400."""
    for operation in _operations(api_schema):
        if operation.method.upper() != "POST":
            continue
        valid = [c for c in _coverage(api_schema, operation) if c.meta.generation.mode.is_positive]
        assert valid and all(isinstance(c.body, dict) for c in valid), (operation.path, valid[:1])
    rerank = _operation(api_schema, "/v1/rerank")
    case = next(c for c in _coverage(api_schema, rerank) if c.meta.generation.mode.is_positive
                and {k: v for k, v in (c.query or {}).items() if k != "all_unscored"}
                == {"score": "probability", "first_stage": "lmdirichlet"})
    assert isinstance(case.body, dict) and case.body.get("first_stage_scores") is None, case.body
    # A body now, without first-stage scores: refused by a rule the document states, naming the field.
    response = case.call()
    assert response.status_code == 400 and response.json()["field"] == "first_stage", response.text
    assert breaks_a_stated_rule(case)
    _validate(case)


def test_one_document_over_max_items_is_refused_413_as_the_document_lists(api_schema, semeval_dev):
    """Issue 34, item 14: one document more than maxItems (--max-documents) to /v2/rerank is answered
    413 naming the field, a status its responses list; with the shipped settings every check passes
    (schemathesis' defaults count a 413 as "schema-violating request accepted"). The case is the coverage
    phase's own maxItems case, its body real SemEval questions so that the count alone is wrong."""
    operation = _operation(api_schema, "/v2/rerank")
    documents = api_schema.raw_schema["components"]["schemas"]["RerankV2Request"]["properties"]["documents"]
    case = next(c for c in _coverage(api_schema, operation) if c.meta.generation.mode.is_negative
                and isinstance(c.body, dict) and len(c.body.get("documents") or []) > documents["maxItems"])
    texts = [f"{c.title}\n{c.body}" for q in semeval_dev for c in q.candidates][:documents["maxItems"] + 1]
    case.body = {"query": semeval_dev[0].query.title, "documents": texts}
    response = case.call()
    assert response.status_code == 413 and response.json()["field"] == "documents", response.text
    assert "413" in api_schema.raw_schema["paths"]["/v2/rerank"]["post"]["responses"]
    _validate(case)
    case.body = {"query": semeval_dev[0].query.title, "documents": texts[:-1]}  # at the limit: answered
    assert case.call().status_code == 200


@pytest.mark.slow
def test_the_coverage_phase_finds_nothing(api_schema):
    """Every case of the coverage phase, every operation, every check: no failure."""
    sent = 0
    for operation in _operations(api_schema):
        for case in _coverage(api_schema, operation):
            _validate(case)
            sent += 1
    assert sent >= 300


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_5xx_and_every_answer_matches_the_spec(api_schema, counter, mode):
    """Each operation in turn: hypothesis draws cases from the spec (valid ones, then invalid ones)."""
    operations = _operations(api_schema)
    assert {f"{op.method.upper()} {op.path}" for op in operations} >= {  # schemathesis skips the spec itself
        "POST /v1/rerank", "POST /v1/encode", "POST /v1/embed", "POST /v2/embed", "GET /healthz",
        "GET /readyz", "GET /metrics"}
    for operation in operations:
        if mode == GenerationMode.NEGATIVE and operation.method.upper() == "GET":
            continue  # nothing to make invalid: no parameters, no body

        @settings(max_examples=EXAMPLES[mode], deadline=None, derandomize=True, database=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(generation_mode=mode))
        def check(case) -> None:
            _validate(case)

        check()


@pytest.mark.slow
def test_the_fuzzer_sent_at_least_1000_requests(counter):
    """Runs after the fuzz test above (same module, file order)."""
    wrapped = counter.get("wsgi")
    assert wrapped is not None, "run the whole module: the fuzz test feeds this count"
    total = sum(wrapped.counts.values())
    assert total >= 1000 and wrapped.counts.get("5xx", 0) == 0, wrapped.counts


def test_st_runs_hooks_read_the_served_models_preprocessing_from_its_document(api_schema, exported):
    """`st run` in this repository (schemathesis.toml's `hooks`) leaves out a valid case only when it breaks
    a rule the document states: the text options it applies are the served model's (``info.x-text-options``
    reads every AskUbuntu title as the model does), and the cases `st run --seed 1` reported as "valid but
    refused" before the hook (`{"texts": ["Ág", "\\b"]}` to /v2/embed, `"*"` as /v2/rerank's query) break
    the text rule, while a real AskUbuntu title with a shell snippet breaks none."""
    assert tomllib.loads(SHIPPED_SETTINGS.read_text(encoding="utf-8"))["hooks"] == "tests/serving/st_hooks.py"
    assert (SHIPPED_SETTINGS.parent / "tests" / "serving" / "st_hooks.py").is_file()
    served = stated_rules.served_preprocessor(api_schema.raw_schema)
    model = ModelDirectory.load(exported["bow-cnn"], threads=1).preprocessor
    assert served.options == model.options
    titles = SHIPPED_SETTINGS.parent / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "train_titles.tsv"
    lines = [line.split("\t")[1] for line in titles.read_text(encoding="utf-8").splitlines()[:300]]
    assert all(served.text_tokens(title) == model.text_tokens(title) for title in lines)
    assert stated_rules.breaks_a_stated_rule("/v2/embed", {"texts": ["Ág", "\b"]}, None, served)
    assert stated_rules.breaks_a_stated_rule("/v2/rerank", {"query": "*", "documents": ["x"]}, None, served)
    snippet = next(title for title in lines if "&&" in title or "sudo" in title)
    assert not stated_rules.breaks_a_stated_rule("/v2/rerank", {"query": snippet, "documents": ["x"]}, None,
                                                 served)
    assert not stated_rules.breaks_a_stated_rule("/v2/embed", {"texts": ["Ág"]}, None, served)
