"""Shared fixtures: ``cli`` runs a console script's entry point in process."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from es_plugin_bridge.cli.main import main as esrerank_main

RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys) -> RunCli:
    """``cli(argv, main=esrerank_main) -> (exit code, stdout, stderr)``, as the console script would end."""

    def run(argv: list[str], main: Callable[[list[str]], None] = esrerank_main) -> tuple[int, str, str]:
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return run
