"""A model directory exported before the model-family refactor (issue 19) loads and scores
bit-identically with today's code.

``data/before_issue_19/gru`` was written by ``export-onnx`` at commit d964fa5 (a tiny GRU trained on
AskUbuntu title pairs), and ``gru_answers.json`` holds what that commit's code answered on it
(``PYTHONPATH=<checkout of d964fa5> python tests/tools/golden_scores.py DIR OUT``): every component
of ``ModelDirectory.rerank`` and the ``/v1/rerank`` (fused with explain, linear) and ``/v1/encode``
answers, as exact JSON floats. Today's code must give the same numbers, float for float."""

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
    assert got["scores"] == expected["scores"]
    assert got["http"] == expected["http"]
    assert len(expected["scores"]) == 3 and len(expected["scores"][0]["fused"]) == 30


def test_it_is_served_by_the_adapter_its_input_names_pick():
    assert isinstance(ModelDirectory.load(BEFORE / "gru", threads=1).inputs, VocabularyInputs)
