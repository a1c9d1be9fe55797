"""Fixtures of the ``esrerank es`` tests on the OpenSearch node (helpers: ``tests/es_commands.py``)."""

from __future__ import annotations

import pytest
from es_commands import TOKEN
from live_sidecar import serve


@pytest.fixture(scope="module")
def sidecar(exported, tmp_path_factory):
    """A live sidecar serving the tiny BOW-CNN with ``es_commands.TOKEN``: (URL, model directory)."""
    with serve(exported["bow-cnn"], TOKEN, tmp_path_factory.mktemp("token")) as url:
        yield url, exported["bow-cnn"]
