"""Errors name the engine the user targets, and say when ``--es-url`` is the sidecar (issue 34, item 12).

Before, a stopped OpenSearch node was "Elasticsearch is unreachable" (``GET /`` did not answer, so the
Elasticsearch client was used and named itself), and an ``--es-url`` pointing at the sidecar was an
Elasticsearch error. Here a real port nobody listens on, and a real sidecar (``esrerank serve``).
"""

from __future__ import annotations

import socket

import pytest
from live_sidecar import serve

TOKEN = "named-errors-t0ken"


@pytest.fixture(scope="module")
def sidecar(exported, tmp_path_factory):
    with serve(exported["bow-cnn"], TOKEN, tmp_path_factory.mktemp("token")) as url:
        yield url


@pytest.fixture
def stopped_url() -> str:
    """The URL of a port that was just free: nothing listens there."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def one_line(code: int, out: str, err: str) -> str:
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out, err)
    return err


def test_a_stopped_engine_of_unknown_kind_is_the_search_engine_at_its_url(cli, stopped_url):
    err = one_line(
        *cli(["es", "search", "exfat mount", "--mode", "bridge", "--index", "q", "--es-url", stopped_url])
    )
    assert f"the search engine at {stopped_url} is unreachable" in err and "Elasticsearch" not in err


@pytest.mark.parametrize(
    ("engine", "name"), [("opensearch", "OpenSearch"), ("elasticsearch", "Elasticsearch")]
)
def test_a_stopped_engine_the_user_chose_is_named(cli, stopped_url, engine, name):
    err = one_line(
        *cli(["search", "exfat mount", "--engine", engine, "--index", "q", "--es-url", stopped_url])
    )
    assert f"{name} at {stopped_url} is unreachable" in err
    other = {"OpenSearch": "Elasticsearch", "Elasticsearch": "OpenSearch"}[name]
    assert other not in err


def test_es_url_at_the_sidecar_says_so(cli, sidecar):
    err = one_line(
        *cli(
            [
                "es",
                "search",
                "exfat mount",
                "--mode",
                "bridge",
                "--index",
                "q",
                "--es-url",
                sidecar,
                "--sidecar",
                sidecar,
                "--token",
                TOKEN,
            ]
        )
    )
    assert f"--es-url {sidecar} answers as the esrerank sidecar (its /readyz), not as a search engine" in err


def test_es_url_at_the_sidecar_with_a_chosen_engine(cli, sidecar):
    err = one_line(
        *cli(["search", "exfat mount", "--engine", "opensearch", "--index", "q", "--es-url", sidecar])
    )
    assert "answers as the esrerank sidecar (its /readyz), not as OpenSearch" in err
