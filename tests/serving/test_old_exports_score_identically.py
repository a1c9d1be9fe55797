"""A model directory exported before the model-family refactor (issue 19) loads and scores
bit-identically with today's code.

``data/before_issue_19/gru`` was written by ``export-onnx`` at commit d964fa5 (a tiny GRU trained on
AskUbuntu title pairs), and ``gru_answers.json`` holds what that commit's code answered on it
(``PYTHONPATH=<checkout of d964fa5> python tests/tools/golden_scores.py DIR OUT``): every component
of ``ModelDirectory.rerank`` and the ``/v1/rerank`` (fused with explain, linear) and ``/v1/encode``
answers, as exact JSON floats. Today's code must give the same numbers, float for float, with one
deliberate exception: a cosine is now summed by ``einsum`` row by row (``core/scoring.py``), where BLAS's
matrix-vector product summed in an order that depended on the request's size; so a score computed from
a cosine may differ from that commit's in its last bit (relative 1e-15), never more. The vectors
themselves (``/v1/encode``), the BOW scores and every other field stay exact."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from golden_scores import answers  # noqa: E402

from es_plugin_bridge.serving.inputs import VocabularyInputs  # noqa: E402
from es_plugin_bridge.serving.model_dir import ModelDirectory  # noqa: E402

BEFORE = Path(__file__).resolve().parent / "data" / "before_issue_19"


def test_a_directory_exported_before_the_refactor_scores_bit_identically():
    expected = json.loads((BEFORE / "gru_answers.json").read_text(encoding="utf-8"))
    got = json.loads(json.dumps(answers(BEFORE / "gru")))  # the same float → JSON round trip
    assert_same(got["scores"], expected["scores"])
    assert_same(got["http"], expected["http"])
    assert got["http"][-1] == expected["http"][-1]  # /v1/encode's vectors: to the bit
    assert [q["bow"] for q in got["scores"]] == [q["bow"] for q in expected["scores"]]
    assert len(expected["scores"]) == 3 and len(expected["scores"][0]["fused"]) == 30


def assert_same(got, expected, where: str = "") -> None:
    """``got == expected`` everywhere, floats within the last bit (relative 1e-15)."""
    if isinstance(expected, float) and isinstance(got, float):
        assert abs(got - expected) <= 1e-15 * max(abs(expected), 1e-300), (where, got, expected)
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), where
        for key in expected:
            assert_same(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for n, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert_same(a, b, f"{where}[{n}]")
    else:
        assert got == expected, (where, got, expected)


def test_it_is_served_by_the_adapter_its_input_names_pick():
    assert isinstance(ModelDirectory.load(BEFORE / "gru", threads=1).inputs, VocabularyInputs)
