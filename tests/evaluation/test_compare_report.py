"""The comparison report (PNG + self-contained HTML) and the results-index documents, from a real
``esrerank evaluate`` run on the shipped SemEval-2016 dev sample (given, bm25, lmdirichlet)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from es_plugin_bridge.elastic.results_index import (
    RESULTS_MAPPING,
    TASK_METRICS,
    mapped_fields,
    metric_field,
    results_doc_id,
    results_documents,
    results_run_id,
)
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.evaluation.compare import compare, write_report
from es_plugin_bridge.evaluation.task_run import run_task
from es_plugin_bridge.measures import RERANK_MEASURES, RETRIEVAL_MEASURES

SEMEVAL = (Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "semeval2016-task3"
           / "SemEval2016-Task3-CQA-QL-dev.xml")
SPEC = f"semeval:{SEMEVAL}"
RANKERS = "given,bm25,lmdirichlet"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict[str, object]:
    """One real evaluate run through the CLI, its outputs, and the same run as a TaskResult."""
    from es_plugin_bridge.cli.main import main

    out = tmp_path_factory.mktemp("compare")
    try:
        main(["evaluate", "--task", "rerank", "--data", SPEC, "--rankers", RANKERS, "--json",
              str(out / "out.json"), "--report", str(out / "report"), "--no-progress"])
    except SystemExit as exc:  # click may exit 0 explicitly
        assert not exc.code
    result = run_task("rerank", RANKERS.split(","), data_spec=SPEC, show_progress=False)
    records = [json.loads(line) for line in (out / "out.per_query.jsonl").read_text().splitlines()]
    return {"out": out, "json": json.loads((out / "out.json").read_text()), "records": records,
            "result": result}


def _wins(records: list[dict], ranker: str, baseline: str = "bm25") -> tuple[int, int, int]:
    ap = {(r["ranker"], r["query_id"]): r["metrics"]["map"] for r in records}
    ids = [r["query_id"] for r in records if r["ranker"] == baseline]
    wins = sum(ap[(ranker, q)] > ap[(baseline, q)] for q in ids)
    losses = sum(ap[(ranker, q)] < ap[(baseline, q)] for q in ids)
    return wins, len(ids) - wins - losses, losses


def test_report_files_are_written_from_a_real_run(run):
    report = run["out"] / "report"
    png = (report / "comparison.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    page = (report / "comparison.html").read_text(encoding="utf-8")
    # Self-contained: the chart is inlined and nothing is fetched from elsewhere.
    assert "data:image/png;base64," in page
    assert not re.search(r"""(src|href)=['"](?!data:)""", page)
    assert "<script" not in page


def test_report_figures_match_the_run(run):
    page = (run["out"] / "report" / "comparison.html").read_text(encoding="utf-8")
    for ranker, values in run["json"]["rankers"].items():
        row = re.search(rf"<tr><td>{ranker}</td>(.*?)</tr>", page).group(1)
        cells = [float(c) for c in re.findall(r"<td[^>]*>([\d.]+)</td>", row)]
        assert cells == [values[m] for m in ("map", "mrr", "p@1", "p@5", "p@10")]
    comparison = compare(run["result"])
    assert comparison.baseline == "bm25" and comparison.primary == "map"
    for outcome in comparison.outcomes:
        expected = _wins(run["records"], outcome.ranker)
        assert (outcome.wins, outcome.ties, outcome.losses) == expected
        assert sum(expected) == run["json"]["n_queries"] == 50
        row = re.search(rf"<tr><td>{outcome.ranker}</td><td class=\"win\">(\d+)</td><td>(\d+)</td>"
                        rf"<td class=\"loss\">(\d+)</td>", page)
        assert tuple(int(g) for g in row.groups()) == expected


def test_disagreements_are_the_largest_spreads(run):
    records = run["records"]
    spread: dict[str, list[float]] = {}
    for r in records:
        spread.setdefault(r["query_id"], []).append(r["metrics"]["map"])
    expected = sorted((max(v) - min(v) for v in spread.values()), reverse=True)[:15]
    found = [d.spread for d in compare(run["result"]).disagreements]
    assert found == pytest.approx(expected)
    assert found[0] > 50  # on this sample the rankers really do disagree on some questions


def test_report_without_bm25_says_so(tmp_path):
    result = run_task("rerank", ["given", "lmdirichlet"], data_spec=SPEC, show_progress=False)
    paths = write_report(result, tmp_path / "r")
    page = paths[1].read_text(encoding="utf-8")
    assert "no bm25 ranker in this run" in page and "Per query against" not in page


def test_report_refuses_a_file_as_directory(tmp_path, run):
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="not a directory"):
        write_report(run["result"], tmp_path / "f")


def test_results_documents_follow_the_mapping(run):
    result = run["result"]
    now = datetime(2025, 5, 1, 12, 0, tzinfo=timezone.utc)
    run_id = results_run_id(result, dataset="semeval2016-dev", engine="embedded", mode="none", now=now)
    assert run_id.startswith("20250501T120000Z-rerank-embedded-none-")
    docs = results_documents(result, run_id=run_id, dataset="semeval2016-dev", engine="embedded",
                             mode="none", timestamp=now)
    assert len(docs) == 3 * 50 and len({results_doc_id(d) for d in docs}) == len(docs)
    fields = mapped_fields()
    for doc in docs:
        flat = {f"{k}.{kk}" if isinstance(v, dict) else k: None
                for k, v in doc.items() for kk in (v if isinstance(v, dict) else [None])}
        assert set(flat) <= set(fields), set(flat) - set(fields)
        assert doc["@timestamp"] == "2025-05-01T12:00:00.000Z"
    by_key = {(d["ranker"], d["query_id"]): d for d in docs}
    for r in run["records"]:
        doc = by_key[(r["ranker"], r["query_id"])]
        assert doc["metrics"]["p_at_1"] == r["metrics"]["p@1"]
        assert doc["rank_first_relevant"] == r["rank_first_relevant"]
        assert doc["n_relevant"] == r["n_relevant"]
        if r["ranker"] == "bm25":
            assert "delta_vs_bm25" not in doc and "outcome_vs_bm25" not in doc
        else:
            base = by_key[("bm25", r["query_id"])]
            delta = doc["metrics"]["map"] - base["metrics"]["map"]
            assert doc["delta_vs_bm25"]["map"] == pytest.approx(delta)
    # The index's outcomes and the report's agree, query by query.
    for outcome in compare(result).outcomes:
        tagged = [d for d in docs if d["ranker"] == outcome.ranker]
        assert sum(d["outcome_vs_bm25"] == "win" for d in tagged) == outcome.wins
        assert sum(d["outcome_vs_bm25"] == "loss" for d in tagged) == outcome.losses
    # Kibana averages per-query metrics back into the reported aggregate.
    for ranker, values in run["json"]["rankers"].items():
        maps = [d["metrics"]["map"] for d in docs if d["ranker"] == ranker]
        assert sum(maps) / len(maps) == pytest.approx(values["map"], abs=0.01)


def test_results_documents_refuse_unknown_engine_or_mode(run):
    with pytest.raises(UserError, match="mode"):
        results_documents(run["result"], run_id="r", dataset="d", engine="embedded", mode="rescore")
    with pytest.raises(UserError, match="engine"):
        results_documents(run["result"], run_id="r", dataset="d", engine="solr", mode="none")


def test_results_documents_take_every_mode_the_es_commands_offer(run):
    """``es evaluate --mode hybrid`` (and ``hybrid-rrf``) used to fail after its whole run: the results
    index kept its own list of modes, without the two newer ones. Every ``--mode`` choice of both
    commands is accepted here, and so is ``none`` (an in-process run)."""
    from es_plugin_bridge.cli.es import search_command
    from es_plugin_bridge.cli.es_evaluate import EXTRA

    offered = {opt.name: list(opt.type.choices) for opt in EXTRA if opt.name == "mode"}["mode"]
    searched = next(p for p in search_command.params if p.name == "mode").type.choices
    assert set(searched) == set(offered) >= {"hybrid", "hybrid-rrf"}
    for mode in [*offered, "none"]:
        docs = results_documents(run["result"], run_id="r", dataset="d", engine="elasticsearch", mode=mode)
        assert {d["mode"] for d in docs} == {mode}


def test_mapping_metrics_are_the_tasks_metrics():
    assert TASK_METRICS["rerank"] == tuple(RERANK_MEASURES)
    assert TASK_METRICS["retrieval"] == tuple(RETRIEVAL_MEASURES)
    metrics = RESULTS_MAPPING["mappings"]["properties"]["metrics"]["properties"]
    assert set(metrics) == {metric_field(m) for ms in TASK_METRICS.values() for m in ms}
    assert "p_at_1" in metrics and "mrr_at_10" in metrics and "acc_at_1" in metrics
