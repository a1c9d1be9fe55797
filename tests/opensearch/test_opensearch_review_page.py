"""The review page of ``es evaluate`` runs of every mode OpenSearch runs, on the node, in a real browser
(Debian's chromium driven by playwright, no mock): each mode's row carries its engine-parity badge (each
query's ranked list from the engine against the in-process ranker the mode must equal, ``elastic/
parity.py``), its p50 / p95 and its requests per search, and what the page shows is what the runs' JSON
holds. The modes of the retrieval task (learned-hybrid, vectors, bridge, hybrid, hybrid-rrf) are joined
into one page; ``rerank`` gives the model's order of the given candidates, so it runs the rerank task
(SemEval dev), a page of its own (runs of two tasks are never paired). Kept cheap: 12 queries over 600
lines of AskUbuntu title pairs, the tiny BOW-CNN the session already exports.
"""

from __future__ import annotations

import json

import pytest
from es_commands import SEMEVAL_DEV, TITLES, common, run
from review_browser import launched, open_page, skip_without_a_browser
from test_opensearch_learned_hybrid import SPREAD

from es_plugin_bridge.elastic.modes import mode_names, mode_spec

pytestmark = [pytest.mark.engine, pytest.mark.slow]

sync_api = skip_without_a_browser()

RETRIEVAL_MODES = ("learned-hybrid", "vectors", "bridge", "hybrid", "hybrid-rrf")
QUERIES = 12
WINDOW = 30


@pytest.fixture(scope="module")
def runs(opensearch, sidecar, tmp_path_factory, cli_module):
    """Each mode's ``es evaluate --report`` directory, and the two joined pages."""
    url, model = sidecar
    root = tmp_path_factory.mktemp("review-modes")
    titles = root / "titles.tsv"
    titles.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[3000:3600]),
                      encoding="utf-8")
    tasks = {mode: ["--task", "retrieval", "--queries", f"pairs:{titles}", "--max-queries", str(QUERIES)]
             for mode in RETRIEVAL_MODES}
    tasks["rerank"] = ["--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}"]
    for mode, task in tasks.items():
        out = root / mode
        cli_module(["es", "evaluate", *task, "--rankers", f"bm25,{mode_spec(mode).ranker}", "--mode", mode,
                    "--window", str(WINDOW), "--model", str(model), "--no-results-index", "--no-progress",
                    "--json", str(out / "run.json"), "--report", str(out), *common(opensearch, url)])
    cli_module(["report", *(str(root / m) for m in RETRIEVAL_MODES), "--out", str(root / "retrieval.html")])
    cli_module(["report", str(root / "rerank"), "--out", str(root / "rerank.html")])
    return root


@pytest.fixture(scope="module")
def cli_module():
    """``esrerank ARGV`` in process; it must succeed (a module fixture has no capsys)."""

    def call(argv: list[str]) -> None:
        assert run(argv) == 0, argv

    return call


@pytest.fixture(scope="module")
def browser():
    with launched(sync_api) as b:
        yield b


def _check_badges(page, runs, modes) -> None:
    """Every mode's row: its badge's figures, its requests per search and p50 are its run's JSON's."""
    for mode in modes:
        ranker = mode_spec(mode).ranker
        answer = json.loads((runs / mode / "run.json").read_text())
        parity, cost = answer["parity"][ranker], answer["cost"][ranker]
        assert parity["mode"] == mode and parity["queries"] == answer["n_queries"]
        name = f"{ranker} [{mode}]" if len(modes) > 1 else ranker
        row = page.locator(f"#summary-table tr[data-ranker='{name}']")
        badge = row.locator("td.parity .badge")
        assert badge.inner_text() == parity["badge"]
        assert int(badge.get_attribute("data-equal")) == parity["equal"]
        assert int(badge.get_attribute("data-queries")) == parity["queries"]
        assert badge.get_attribute("data-differ") == " ".join(parity["differ"])
        # the engine ranks as the in-process ranker, up to near-ties the node tests allow to swap (on this
        # data learned-hybrid puts two neighbours whose in-process scores are equal the other way round)
        if parity["differ"]:
            assert parity["max_swap_gap"] is not None and parity["max_swap_gap"] <= SPREAD, parity["examples"]
        requests = row.locator("td.requests").inner_text()
        assert requests == ", ".join(f"{v:.2f} {k}" for k, v in cost["requests_per_search"].items())
        assert cost["requests_per_search"]["engine"] >= 1
        assert float(row.locator("td.p50").inner_text()) == pytest.approx(cost["p50_ms"], abs=0.001)
        assert cost["p50_ms"] <= cost["p95_ms"] and cost["searches"] == answer["n_queries"]
        # the first stage ran on the engine too: no badge, said where it ran
        assert page.locator(f"#summary-table tr[data-ranker='{name.replace(ranker, 'bm25', 1)}'] "
                            "td.parity").inner_text() == "engine"


def test_every_mode_opensearch_runs_is_here():
    """A mode added to the registry for OpenSearch fails here until this page shows it."""
    assert sorted([*RETRIEVAL_MODES, "rerank"]) == sorted(
        m for m in mode_names() if "opensearch" in mode_spec(m).engines)


def test_each_retrieval_mode_has_its_parity_badge(runs, browser):
    page, requested, errors = open_page(browser, runs / "retrieval.html")
    assert not errors
    assert page.locator("#refusals .refusal").count() == 0
    _check_badges(page, runs, RETRIEVAL_MODES)
    assert requested == [(runs / "retrieval.html").as_uri()]
    page.context.close()


def test_mode_rerank_has_its_parity_badge(runs, browser):
    page, requested, errors = open_page(browser, runs / "rerank.html")
    assert not errors
    _check_badges(page, runs, ("rerank",))
    assert requested == [(runs / "rerank.html").as_uri()]
    page.context.close()
