"""A text is cut to what the model reads before it is preprocessed (issue 48, item 3): on real AskUbuntu
questions (HTML bodies, many with long code blocks) the ids every model reads, and so its vectors, are
exactly those of the whole text, with each way of treating code; and 50 texts of 99,999 characters
rerank in about the time of short ones (23.8 s before)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest

from es_plugin_bridge.data.questions import split_title_body
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.app import create_app
from es_plugin_bridge.serving.text_cut import read_question
from es_plugin_bridge.text import Preprocessor, TextOptions

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
VAL = (SAMPLES / "askubuntu-pairs" / "val.tsv").read_text(encoding="utf-8").splitlines()
#: Every distinct question of the validation pairs (title, then its HTML body).
TEXTS = sorted({text for line in VAL for text in line.split("\t")[1:3]})
#: The longest: the ones a cut can change (a shorter one is never cut).
LONGEST = sorted(TEXTS, key=len)[-300:]


def _questions(texts: list[str]) -> list[Question]:
    return [Question("", *split_title_body(text)) for text in texts]


@pytest.mark.parametrize("name", ["bow-cnn", "gru"])
def test_what_the_model_reads_of_a_cut_text_is_what_it_reads_of_the_whole(exported, name):
    model = ModelDirectory.load(exported[name], threads=1)
    questions = _questions(LONGEST)
    assert sum("<pre><code>" in q.body for q in questions) > 100  # long code blocks, the hard case
    cut = [read_question(model.inputs, q) for q in questions]
    assert sum(c.body != q.body for c, q in zip(cut, questions, strict=True)) > 40  # those past 2,784 chars
    assert [model.token_ids(c) for c in cut] == [model.token_ids(q) for q in questions]
    assert np.array_equal(model.vectors(cut), model.vectors(questions))  # bit-identical vectors


@pytest.mark.parametrize("code", ["keep", "remove", "prefix"])
def test_every_way_of_treating_code_reads_the_same_tokens(exported, code):
    model = ModelDirectory.load(exported["bow-cnn"], threads=1)
    pre = Preprocessor(TextOptions(code=code))
    inputs = dataclasses.replace(model.inputs, preprocessor=pre)
    for question in _questions(LONGEST):
        cut = read_question(inputs, question)
        assert pre.body_tokens(cut) == pre.body_tokens(question)
        assert pre.title_tokens(cut) == pre.title_tokens(question)


def test_fifty_texts_of_99999_characters_cost_a_fraction_of_preprocessing_them_whole(exported):
    """Timed against this machine's own cost of preprocessing the 50 texts whole (which the rerank
    did before the cut: it then took longer than that, here it takes a fraction)."""
    app = create_app(exported["bow-cnn"], cache_size=0)
    client = app.test_client()
    pre = app.extensions["esrerank"].model.inputs.preprocessor
    bodies = [t.split("<p>", 1)[-1] for t in LONGEST]
    long_texts = []
    for i in range(50):  # real text: AskUbuntu questions run together to 99,999 characters
        text, j = TEXTS[i].split("<p>", 1)[0] + bodies[i], i
        while len(text) < 99_999:
            j += 7
            text += " " + bodies[j % len(bodies)]
        long_texts.append(text[:99_999])
    started = time.perf_counter()
    for text in long_texts:
        title, body = split_title_body(text)
        pre.text_tokens(title), pre.text_tokens(body)
    whole = time.perf_counter() - started
    body = {"query": TEXTS[0], "documents": long_texts}
    started = time.perf_counter()
    answer = client.post("/v1/rerank", json=body, headers={"X-Request-Timeout-Ms": "60000"})
    elapsed = time.perf_counter() - started
    assert answer.status_code == 200 and len(answer.get_json()["results"]) == 50
    assert elapsed < whole / 3, (elapsed, whole)
