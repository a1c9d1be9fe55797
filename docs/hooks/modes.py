"""MkDocs hook: the modes table is drawn from the mode registry at build time.

A page holds a ``<!-- modes -->`` marker; this hook replaces it with one row per registered mode (in
``--help`` order): who calls the sidecar, what each engine needs, and the in-process ranker the mode
gives (what ``es evaluate`` reports it as). A new mode module appears here with nothing else edited.
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- modes -->"
ENGINES = {"elasticsearch": "Elasticsearch", "opensearch": "OpenSearch"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render() -> str:
    """The Markdown table of every registered mode."""
    from es_plugin_bridge.elastic.modes import mode_names, mode_spec

    lines = ["| mode | who calls the sidecar | " + " | ".join(ENGINES.values()) + " | ranker it gives |",
             "| --- | --- | " + " | ".join("---" for _ in ENGINES) + " | --- |"]
    for name in mode_names():
        spec = mode_spec(name)
        cells = [f"`{name}`", _cell(spec.sidecar or spec.summary),
                 *(_cell(spec.engine_text(engine)) for engine in ENGINES), f"`{spec.ranker}`"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return markdown.replace(MARKER, render()) if MARKER in markdown else markdown
