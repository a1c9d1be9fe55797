"""What the ``esrerank es`` tests on the OpenSearch node share (tests/opensearch/): the sample data, the
sidecar's token, the connection arguments every command takes, and running a command in process where
no ``capsys`` is at hand (a module-scoped fixture)."""

from __future__ import annotations

from pathlib import Path

from es_plugin_bridge.cli.main import main

SAMPLES = Path(__file__).resolve().parents[1] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
TOKEN = "es-commands-t0ken"


def common(opensearch, sidecar_url: str) -> list[str]:
    """``--es-url``, ``--sidecar`` and ``--token`` of one command against the node and a sidecar."""
    return ["--es-url", opensearch.url, "--sidecar", sidecar_url, "--token", TOKEN]


def run(argv: list[str]) -> int:
    """``esrerank ARGV`` through the console entry point's own code; its exit status."""
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
