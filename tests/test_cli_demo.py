"""``esrerank demo`` on the shipped samples: steps, printed comparison, files written."""

from __future__ import annotations

import json

from es_plugin_bridge.cli.demo import STEPS
from es_plugin_bridge.cli.main import main


def test_demo_rerank_step_writes_results_and_summary(tmp_path, capsys):
    main(["demo", "--out", str(tmp_path / "demo"), "--step", "rerank", "--no-progress"])
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "demo" / "rerank-semeval-dev.json").read_text())
    from es_plugin_bridge.engines import SIMILARITIES

    assert list(data["rankers"]) == ["given", *SIMILARITIES]
    assert data["rankers"]["given"]["map"] == 71.35
    summary = (tmp_path / "demo" / "summary.md").read_text()
    assert "| given | 71.35 | 76.67 |" in summary
    assert "esrerank evaluate --task rerank" in summary
    for name in ("rerank-semeval-dev.per_query.jsonl", "rerank-semeval-dev.png", "summary.md"):
        assert (tmp_path / "demo" / name).stat().st_size > 0
        assert name in out


def test_demo_steps_are_named_and_unknown_step_is_an_error(tmp_path, capsys):
    assert [name for name, _ in STEPS][:2] == ["rerank", "retrieval"]
    try:
        main(["demo", "--out", str(tmp_path), "--step", "nope"])
    except SystemExit as exc:
        assert exc.code != 0
    err = capsys.readouterr().err
    assert err.startswith("error: unknown demo step 'nope'")
