"""Request bodies the sidecar tests send, built one way."""

from __future__ import annotations

from typing import Any

from es_plugin_bridge.data.types import Question


def doc_json(q: Question) -> dict[str, Any]:
    """A question as ``/v1/rerank`` and ``/v1/encode`` take it: ``{id, title, body}``."""
    return {"id": q.id, "title": q.title, "body": q.body}
