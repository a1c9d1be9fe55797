"""How both search commands print an answer (``esrerank search`` and ``es search``): their JSON as each
documents it, or one table: rank, score, the hit's first-stage rank where the command knows it, id and
title, titled with whether the sidecar reranked it; below it, why not, and any note the mode gives."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any


def print_json(payload: Mapping[str, Any]) -> None:
    json.dump(payload, sys.stdout, indent=2)
    sys.stdout.write("\n")


def print_table(title: str, hits: Sequence[Mapping[str, Any]], *, reranked: bool,
                fallback_reason: str | None, note: str | None = None,
                explain: Mapping[str, Any] | None = None) -> None:
    """``hits``: dicts with ``id``, ``title``, ``score`` and, where known, ``first_stage_rank``;
    ``fallback_reason`` None: nothing to say (also when no sidecar was asked for)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    how = "reranked by the sidecar" if reranked else "first-stage order"
    table = Table(title=escape(f"{title}, {how}"))
    first_stage = any(hit.get("first_stage_rank") is not None for hit in hits)
    columns = [("#", "right"), ("score", "right"), *([("first stage", "right")] if first_stage else []),
               ("id", "left"), ("title", "left")]
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for rank, hit in enumerate(hits, start=1):
        ranks = [str(hit.get("first_stage_rank", ""))] if first_stage else []
        table.add_row(str(rank), f"{hit['score']:.4f}", *ranks, escape(str(hit["id"])), escape(hit["title"]))
    console = Console()
    console.print(table)
    if fallback_reason:
        console.print(f"[yellow]not reranked: {escape(fallback_reason)}[/yellow]")
    if note:
        console.print(f"[yellow]{escape(note)}[/yellow]")
    if explain is not None:
        console.print_json(json.dumps(explain))
