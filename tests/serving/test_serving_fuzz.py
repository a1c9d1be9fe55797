"""Property-based fuzzing of the sidecar from its own ``/openapi.json`` (schemathesis): valid and invalid
requests to every operation, at least 1,000 in all, must never answer 5xx and every answer must match the
spec (status documented, body matching its schema, content type), and a request valid against the
document is accepted unless it breaks one of the rules across fields the document states
(``openapi.CROSS_FIELD_RULES``). In process (WSGI), bounded, seeded."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance
from schemathesis.config import SchemathesisConfig

from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.openapi import CROSS_FIELD_RULES

EXAMPLES = 300  # per operation and generation mode (counted below: at least 1,000 in all)


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


def breaks_a_stated_rule(case) -> bool:
    """Whether a /v1/rerank case breaks one of the document's rules across fields, restated here
    (``CROSS_FIELD_RULES``, in the operation's description): such a request is rightly a 400."""
    if case.operation.path != "/v1/rerank" or not isinstance(case.body, dict):
        return False
    body, query = case.body, case.query or {}
    scores, linear = body.get("first_stage_scores"), query.get("score") == "linear"
    stage_in_body, stage_in_url = body.get("first_stage"), query.get("first_stage")
    return ((scores is not None and len(scores) != len(body.get("documents", [])))
            or ((stage_in_body or stage_in_url) is not None and scores is None and not linear)
            or (linear and scores is not None)
            or (stage_in_body is not None and stage_in_url is not None and stage_in_body != stage_in_url))


def test_the_document_states_the_rules_the_fuzzer_exempts(api_schema):
    description = api_schema.raw_schema["paths"]["/v1/rerank"]["post"]["description"]
    assert len(CROSS_FIELD_RULES) == 4 and all(rule in description for rule in CROSS_FIELD_RULES)


def test_the_document_is_the_served_model_and_limit(api_schema, exported):
    """first_stage's enum is the model's β names and maxItems its --max-documents: a first stage the model
    has no β for, or one document too many, is invalid in the document as it is refused by the server."""
    fusion = sorted(ModelDirectory.load(exported["bow-cnn"], threads=1).fusion)
    schemas = api_schema.raw_schema["components"]["schemas"]
    assert schemas["RerankRequest"]["properties"]["first_stage"]["anyOf"][0]["enum"] == fusion
    params = api_schema.raw_schema["paths"]["/v1/rerank"]["post"]["parameters"]
    assert next(p for p in params if p["name"] == "first_stage")["schema"]["enum"] == fusion
    for model, field in (("RerankRequest", "documents"), ("RerankV2Request", "documents"),
                         ("EmbedRequest", "texts")):
        assert schemas[model]["properties"][field]["maxItems"] == 50


@pytest.fixture(scope="module")
def counter():
    return {}


@pytest.fixture(scope="module")
def fuzzed_app(exported, counter):
    app = create_app(ModelDirectory.load(exported["bow-cnn"], threads=1), max_documents=50)
    app.wsgi_app = wrapped = _Counter(app.wsgi_app)  # type: ignore[method-assign]
    counter["wsgi"] = wrapped
    return app


@pytest.fixture(scope="module")
def api_schema(fuzzed_app):
    # schemathesis' default statuses for refused invalid data (its "expected-statuses" setting), plus 413:
    # how the server refuses more documents than --max-documents (the document's maxItems).
    rejections = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
    config = SchemathesisConfig.from_dict(
        {"checks": {"negative_data_rejection": {"expected-statuses": rejections}}})
    return schemathesis.openapi.from_wsgi("/openapi.json", fuzzed_app, config=config)


def _operations(api_schema) -> list:
    return [result.ok() for result in api_schema.get_all_operations()]


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_5xx_and_every_answer_matches_the_spec(api_schema, counter, mode):
    """Each operation in turn: hypothesis draws cases from the spec (valid ones, then invalid ones)."""
    operations = _operations(api_schema)
    assert {f"{op.method.upper()} {op.path}" for op in operations} >= {  # schemathesis skips the spec itself
        "POST /v1/rerank", "POST /v1/embed", "GET /healthz", "GET /readyz", "GET /metrics"}
    for operation in operations:
        if mode == GenerationMode.NEGATIVE and operation.method.upper() == "GET":
            continue  # nothing to make invalid: no parameters, no body

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(generation_mode=mode))
        def check(case) -> None:
            # Every check, "positive data acceptance" included (a valid request must not be a 4xx), but
            # for requests that break a rule across fields the document states in words.
            positive = mode == GenerationMode.POSITIVE
            exempt = [positive_data_acceptance] if positive and breaks_a_stated_rule(case) else []
            case.call_and_validate(excluded_checks=exempt)

        check()


@pytest.mark.slow
def test_the_fuzzer_sent_at_least_1000_requests(counter):
    """Runs after the fuzz test above (same module, file order)."""
    wrapped = counter.get("wsgi")
    assert wrapped is not None, "run the whole module: the fuzz test feeds this count"
    total = sum(wrapped.counts.values())
    assert total >= 1000 and wrapped.counts.get("5xx", 0) == 0, wrapped.counts
