"""The OpenSearch page's quick start runs as written: every ``esrerank es`` line of its first code block,
on the test node, with a live sidecar; ``MODEL_DIR`` is the tiny exported model, and the environment
gives what the page's ``export`` and ``esrerank serve`` lines give (the node's URL, the sidecar's)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from live_sidecar import serve

pytestmark = [pytest.mark.engine, pytest.mark.slow]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "opensearch.md"
TOKEN = "docs-t0ken"


def quick_start() -> list[str]:
    block = re.search(r"^```bash\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M).group(1)
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return [line for line in lines if line.startswith("esrerank es ")]


def test_the_quick_start_is_setup_index_search_and_evaluate():
    commands = [shlex.split(line)[2] for line in quick_start()]
    assert commands == ["setup", "index", "search", "search", "search", "search", "evaluate"]


def test_the_quick_start_runs_as_written(opensearch, exported, cli, monkeypatch, tmp_path):
    with serve(exported["bow-cnn"], TOKEN, tmp_path) as sidecar:
        monkeypatch.chdir(PAGE.parents[1])  # the page's paths are relative to the repository
        monkeypatch.setenv("ESRERANK_ES_URL", opensearch.url)
        monkeypatch.setenv("ESRERANK_SIDECAR_URL", sidecar)
        monkeypatch.setenv("ESRERANK_TOKEN", TOKEN)
        outputs = []
        for line in quick_start():
            argv = [str(exported["bow-cnn"]) if arg == "MODEL_DIR" else arg for arg in shlex.split(line)[1:]]
            code, out, err = cli(argv)
            assert code == 0, (line, err)
            outputs.append(out)
    assert "mode rerank:  ready (search pipeline questions-rerank)" in outputs[0]
    assert "mode hybrid:  ready" in outputs[0]
    assert "mode learned-hybrid: ready, the default" in outputs[0]
    assert "indexed 550" in outputs[1]
    assert "mode learned-hybrid" in outputs[2] and "Q" in outputs[2]  # es search without --mode
    assert "mode rerank" in outputs[3] and "first-stage order" not in outputs[3]
    assert "mode hybrid" in outputs[5] and "Q" in outputs[5]  # hits, with their SemEval ids
    assert "model = mode rerank over bm25" in outputs[6]
