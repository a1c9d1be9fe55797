"""The files one evaluation writes, all or none: the JSON, the per-query JSONL, the plot, the comparison
report and the explanation, each where the command was told (``esrerank evaluate``'s output options)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from es_plugin_bridge.evaluation import report
from es_plugin_bridge.evaluation.results import TaskResult


def write_review(result: TaskResult, out_dir: Path, label: str = "run") -> list[Path]:
    """``DIR/review.json`` (the bundle ``esrerank report`` joins) and ``DIR/report.html`` (its page)."""
    import json

    from es_plugin_bridge.evaluation.review_data import BUNDLE_NAME, bundle, join
    from es_plugin_bridge.evaluation.review_page import PAGE_NAME, write_page

    data = bundle(result, label)
    text = json.dumps(data, ensure_ascii=False) + "\n"
    return [report.write_atomic(Path(out_dir) / BUNDLE_NAME, lambda f: f.write(text)),
            write_page(join([data]), Path(out_dir) / PAGE_NAME)]


@dataclass(frozen=True)
class Outputs:
    """Where each output goes (None: not written). ``per_query`` defaults to next to ``json``; ``explain``
    writes ``OUT.explain.jsonl`` next to ``json``, which it therefore needs."""

    json: Path | None = None
    per_query: Path | None = None
    plot: Path | None = None
    report_dir: Path | None = None
    explain: bool = False

    def explain_path(self) -> Path | None:
        if not self.explain or self.json is None:
            return None
        return self.json.with_name(self.json.stem + ".explain.jsonl")

    def write(self, result: TaskResult) -> list[Path]:
        """Write every output of a finished result; a failure leaves none of them behind (an unwritable
        plot leaves no JSON), so nothing partial reads as complete. The paths written, in order."""
        per_query = self.per_query or (report.per_query_path(self.json) if self.json is not None else None)
        written: list[Path] = []
        with report.all_or_none():
            if self.json is not None:
                written.append(report.write_json(result, self.json))
            if per_query is not None:
                written.append(report.write_per_query(result, per_query))
            if self.plot is not None:
                written.append(report.write_plot(result, self.plot))
            if self.report_dir is not None:
                from es_plugin_bridge.evaluation.compare import write_report

                written.extend(write_report(result, self.report_dir))
                written.extend(write_review(result, self.report_dir))
            explain_path = self.explain_path()
            if explain_path is not None:
                from es_plugin_bridge.evaluation.explain import write_explain

                written.append(write_explain(result.explain, explain_path))
        return written
