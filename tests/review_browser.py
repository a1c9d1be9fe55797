"""What the review page's browser tests share (tests/evaluation/, tests/opensearch/): Debian's chromium
driven by playwright (no mock), launched offline, and a page opened from file:// whose every request is
recorded and, unless it is the file itself, aborted. ``skip_without_a_browser()`` skips a module, naming
what is missing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def skip_without_a_browser() -> Any:
    """playwright's sync API, or a module-level skip saying what is missing."""
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="playwright is not installed (pip install -e .[dev])")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y --no-install-recommends chromium)",
                    allow_module_level=True)
    return sync_api


@contextlib.contextmanager
def launched(sync_api: Any) -> Iterator[Any]:
    """Headless chromium, closed on the way out."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser: Any, path: Path) -> tuple[Any, list[str], list[str]]:
    """``(page, URLs requested, script errors)`` of ``path`` opened and ready (``body[data-ready]``)."""
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    requested: list[str] = []

    def route(r: Any) -> None:
        requested.append(r.request.url)
        r.continue_() if r.request.url == path.as_uri() else r.abort()

    page.route("**/*", route)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    return page, requested, errors
