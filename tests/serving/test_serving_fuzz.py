"""Property-based fuzzing of the sidecar from its own ``/openapi.json`` (schemathesis): valid and invalid
requests to every operation, at least 1,000 in all, must never answer 5xx and every answer must match the
spec (status documented, body matching its schema, content type). In process (WSGI), bounded, seeded."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import positive_data_acceptance

from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app

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
    return schemathesis.openapi.from_wsgi("/openapi.json", fuzzed_app)


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
            # Not "positive data acceptance": the spec cannot state cross-field rules (first_stage needs
            # first_stage_scores of the same length, the model's own first stages), so a schema-valid body
            # may rightly be a 400; every other check of schemathesis applies.
            case.call_and_validate(excluded_checks=[positive_data_acceptance])

        check()


@pytest.mark.slow
def test_the_fuzzer_sent_at_least_1000_requests(counter):
    """Runs after the fuzz test above (same module, file order)."""
    wrapped = counter.get("wsgi")
    assert wrapped is not None, "run the whole module: the fuzz test feeds this count"
    total = sum(wrapped.counts.values())
    assert total >= 1000 and wrapped.counts.get("5xx", 0) == 0, wrapped.counts
