"""The review page in a real browser (Debian's chromium driven by playwright, no mock), built from real
``esrerank evaluate`` runs on the packaged AskUbuntu sample: it opens from file:// and requests nothing
else, its summary equals the run's JSON, the most-changed query shows both lists with the known duplicate
marked, two judgments download as a pairs TSV the reader reads back, two incomparable runs are
refused, and axe-core (from the axe-playwright-python wheel, offline) finds no serious violation.
Skips, naming why, where chromium or playwright is missing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from review_browser import launched, open_page, skip_without_a_browser

from es_plugin_bridge.cli.main import main
from es_plugin_bridge.data.readers.pairs import read_pairs

SAMPLE = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs" / "val.tsv"
SCREENSHOT = os.environ.get("ESRERANK_SCREENSHOT")  # a path: the test also writes the README's picture

sync_api = skip_without_a_browser()


def _evaluate(out: Path, max_queries: int) -> None:
    try:
        main(["evaluate", "--task", "retrieval", "--queries", f"pairs:{SAMPLE}",
              "--max-queries", str(max_queries), "--rankers", "bm25,lmdirichlet",
              "--json", str(out / "run.json"), "--report", str(out), "--no-progress"])
    except SystemExit as exc:
        assert not exc.code


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("review")
    _evaluate(root / "a", 40)
    _evaluate(root / "b", 30)  # another query set: cannot be paired with a
    for argv in (["report", str(root / "a"), str(root / "b"), "--out", str(root / "joined.html")],):
        try:
            main(argv)
        except SystemExit as exc:
            assert not exc.code
    return {"a": root / "a", "b": root / "b", "joined": root / "joined.html", "root": root}


@pytest.fixture(scope="module")
def browser():
    with launched(sync_api) as b:
        yield b


def test_page_requests_nothing_and_summary_equals_the_json(runs, browser):
    page, requested, errors = open_page(browser, runs["a"] / "report.html")
    assert not errors
    result = json.loads((runs["a"] / "run.json").read_text())
    for ranker, metrics in result["rankers"].items():
        for metric, value in metrics.items():
            cell = page.locator(f"#summary-table tr[data-ranker='{ranker}'] td[data-metric='{metric}'] .v")
            assert float(cell.inner_text()) == pytest.approx(value, abs=0.005)
    p = page.locator("#summary-table tr[data-ranker='lmdirichlet'] td.p").inner_text()
    expected = result["significance"]["rankers"]["lmdirichlet"]["vs_first_stage"]["p_value"]
    assert float(p) == pytest.approx(expected)
    bundle = json.loads((runs["a"] / "review.json").read_text())
    for ranker, values in bundle["rankers"].items():  # latency beside quality: the per-query p50 and p95
        row = page.locator(f"#summary-table tr[data-ranker='{ranker}']")
        assert float(row.locator("td.p50").inner_text()) == pytest.approx(values["p50_ms"], abs=0.001)
        assert values["p50_ms"] <= values["p95_ms"]
    assert requested == [(runs["a"] / "report.html").as_uri()]
    page.context.close()


def test_most_changed_query_opens_with_both_lists_and_the_duplicate_marked(runs, browser):
    page, _, _ = open_page(browser, runs["a"] / "report.html")
    bundle = json.loads((runs["a"] / "review.json").read_text())
    deltas = {q["id"]: q["by"]["lmdirichlet"]["value"] - q["by"]["bm25"]["value"] for q in bundle["queries"]}
    top = max(deltas.values(), key=abs)
    first = page.locator("#queries tbody tr").first
    assert abs(deltas[first.get_attribute("data-qid")]) == pytest.approx(abs(top))
    page.keyboard.press("j")
    page.keyboard.press("k")
    page.keyboard.press("Enter")
    qid = first.get_attribute("data-qid")
    assert page.locator("#detail").get_attribute("data-qid") == qid
    query = next(q for q in bundle["queries"] if q["id"] == qid)
    assert page.locator("#detail h3").inner_text().startswith(query["text"].strip())
    lists = page.locator("#detail section.list")
    assert lists.count() == 2
    for name in ("lmdirichlet", "bm25"):
        marked = page.locator(f"#detail section[data-ranker='{name}'] li.rel")
        rank = query["by"][name]["rank"]
        assert marked.count() == (1 if rank else 0)
        if rank:
            items = page.locator(f"#detail section[data-ranker='{name}'] li")
            assert items.nth(rank - 1).get_attribute("class") == "rel"
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT, full_page=False)
    page.context.close()


def test_filters_narrow_the_queries(runs, browser):
    page, _, _ = open_page(browser, runs["a"] / "report.html")
    rows = page.locator("#queries tbody tr:not([hidden])")
    every = rows.count()
    page.check("#only-changed")
    changed = rows.count()
    assert changed > 1
    # a filtered row opens itself, and the keys move among the shown rows only
    second = rows.nth(1).get_attribute("data-qid")
    rows.nth(1).click()
    assert page.locator("#detail").get_attribute("data-qid") == second
    page.keyboard.press("k")
    page.keyboard.press("Enter")
    first = rows.first.get_attribute("data-qid")
    assert page.locator("#detail").get_attribute("data-qid") == first
    assert page.locator("#queries tbody tr.sel").get_attribute("data-qid") == first
    page.check("#only-losses")
    assert rows.count() <= changed <= every == 40
    page.uncheck("#only-changed")
    page.uncheck("#only-losses")
    page.fill("#filter-text", "zzzz-no-such-words")
    assert rows.count() == 0
    page.context.close()


def test_two_judgments_download_as_pairs_the_reader_reads(runs, browser, tmp_path):
    page, _, _ = open_page(browser, runs["a"] / "report.html")
    page.locator("#queries tbody tr").first.click()
    buttons = page.locator("#detail section.list").first
    buttons.locator("button[data-judge='duplicate']").first.click()
    buttons.locator("button[data-judge='non-duplicate']").nth(1).click()
    with page.expect_download() as info:
        page.click("#download")
    target = tmp_path / "judgments.tsv"
    info.value.save_as(target)
    dataset = read_pairs(target)
    assert sorted(p.label for p in dataset.pairs) == [0, 1]
    qid = page.locator("#detail").get_attribute("data-qid")
    bundle = json.loads((runs["a"] / "review.json").read_text())
    text = next(q["text"] for q in bundle["queries"] if q["id"] == qid)
    assert all(p.q1.title.strip() == text.strip() for p in dataset.pairs)
    page.context.close()


def test_incomparable_runs_are_refused_in_one_line(runs, browser):
    page, requested, _ = open_page(browser, runs["joined"])
    refusal = page.locator("#refusals .refusal")
    assert refusal.count() == 1
    assert "b is not paired with a" in refusal.inner_text() and "queries" in refusal.inner_text()
    assert page.locator("#summary-table tbody tr").count() == 2  # only run a's rankers
    assert requested == [runs["joined"].as_uri()]
    page.context.close()


def test_basic_accessibility(runs, browser):
    """By hand (axe-core cannot be fetched offline here): a language, a label on every input and select,
    a name on every button, alt text on every image, one h1."""
    page, _, _ = open_page(browser, runs["a"] / "report.html")
    page.locator("#queries tbody tr").first.click()
    assert page.get_attribute("html", "lang") == "en"
    unlabelled = page.evaluate("""() => [...document.querySelectorAll('input, select')]
        .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map(e => e.id)""")
    assert unlabelled == []
    nameless = page.evaluate(
        "() => [...document.querySelectorAll('button')].filter(b => !b.textContent.trim()).length")
    assert nameless == 0
    assert page.evaluate("() => [...document.images].filter(i => !i.alt).length") == 0
    assert page.locator("h1").count() == 1
    page.context.close()


def test_report_refuses_a_directory_without_a_bundle(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report", str(tmp_path), "--out", str(tmp_path / "r.html")])
    assert exc.value.code != 0
    assert "no review.json" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_axe_core_finds_no_serious_violation(runs, browser):
    """axe-core itself (the copy inside the axe-playwright-python wheel, so nothing is fetched), injected
    into the page with the detail panel and its judging buttons open."""
    axe = pytest.importorskip("axe_playwright_python", reason="axe-playwright-python is not installed")
    script = (Path(axe.__file__).parent / "axe.min.js").read_text(encoding="utf-8")
    page, _, _ = open_page(browser, runs["a"] / "report.html")
    page.locator("#queries tbody tr").first.click()
    page.evaluate(script)  # evaluate, not a script tag: the page's own CSP allows only its inline scripts
    found = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
                          ".map(v => ({id: v.id, impact: v.impact, n: v.nodes.length}))")
    serious = [v for v in found if v["impact"] in ("serious", "critical")]
    assert serious == [], serious
    page.context.close()
