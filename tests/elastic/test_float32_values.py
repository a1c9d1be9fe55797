"""``mappings.float32_values`` writes each stored vector component with numpy's shortest float32 digits
(``astype(str)``, Dragon4) without calling it per component: the same text, digit for digit, on real
vectors (the BOW-CNN trained on AskUbuntu, over titles with shell and code in them) and on every class
of float32 (random bit patterns: subnormals, the largest, NaN and infinities, both zeros), and each value
gives its float32 back. A batch at once equals row by row, and ``documents`` equals ``document``."""

from __future__ import annotations

import numpy as np
import pytest
from es_commands import TITLES

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.serving import ModelDirectory


def numpy_shortest(values: np.ndarray) -> list:
    """What the product wrote before: each component through numpy's shortest repr."""
    return np.asarray(values, dtype=np.float32).astype(str).astype(np.float64).tolist()


def same_text(mine: list, theirs: list) -> bool:
    return [repr(v) for v in np.ravel(mine)] == [repr(v) for v in np.ravel(theirs)]


def test_every_float32_class_gets_numpy_s_digits_and_its_float32_back():
    rng = np.random.default_rng(36)
    bits = np.frombuffer(rng.bytes(4 * 400_000), dtype=np.float32)  # every exponent, NaN and inf too
    with np.errstate(over="ignore"):
        spread = (rng.standard_normal(200_000) * 10.0 ** rng.integers(-45, 39, 200_000)).astype(np.float32)
    edges = np.array([0.0, -0.0, 1.0, 0.1, 1e-45, -1e-45, 1.1754944e-38, 3.4028235e38, 16777217.0, 1e-14,
                      9.999999e-15, 1e22, 9.999999e22, 5e-324, np.inf, -np.inf, np.nan], dtype=np.float32)
    for values in (bits, spread, edges):
        mine = mappings.float32_values(values)
        assert same_text(mine, numpy_shortest(values))
        back, kept = np.asarray(mine, dtype=np.float32), ~np.isnan(values)
        assert np.array_equal(back.view(np.uint32)[kept], values.view(np.uint32)[kept])


@pytest.fixture(scope="module")
def askubuntu_vectors(exported):
    questions = list(read_spec(f"pairs:{TITLES}").questions.values())[:600]
    assert any("sudo " in q.title or "/" in q.title for q in questions)  # shell and paths among them
    return questions, ModelDirectory.load(exported["bow-cnn"], threads=1).vectors(questions)


def test_real_vectors_get_numpy_s_digits_as_a_batch_and_row_by_row(askubuntu_vectors):
    _, vectors = askubuntu_vectors
    batch = mappings.float32_values(vectors)
    assert len(batch) == len(vectors) and len(batch[0]) == vectors.shape[1]
    assert same_text(batch, numpy_shortest(vectors))
    assert batch == [mappings.float32_values(row) for row in vectors]


def test_documents_of_a_batch_equal_each_document(askubuntu_vectors):
    questions, vectors = askubuntu_vectors
    embeddings = [{"vector": v.astype(float).tolist(), "terms": {"ubuntu": 1.0}} for v in vectors]
    embeddings[3] = None  # a question without an embedding keeps its place
    tokens = [q.title.lower().split() for q in questions]
    assert mappings.documents(questions, tokens, embeddings) == [
        mappings.document(q, t, e) for q, t, e in zip(questions, tokens, embeddings, strict=True)]
