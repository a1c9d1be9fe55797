"""Elasticsearch as the engine of an evaluation run: a throw-away index holding the run's collection.

Collection statistics must be those of the run's own collection (as in the embedded engine), so a
run gets its own index, created with the similarities' parameters of the run, filled on the first
first-stage call, and deleted at the end unless it is kept.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.connection import Connection, call
from es_plugin_bridge.elastic.first_stage import ElasticsearchEngine, Tokens
from es_plugin_bridge.errors import UserError


@contextmanager
def evaluation_engine(
    conn: Connection,
    tokens: Tokens,
    *,
    params: Mapping[str, Mapping[str, float]] | None = None,
    index: str | None = None,
    keep: bool = False,
    embed: Callable[[Sequence[Question]], list[dict[str, Any]]] | None = None,
    dimension: int | None = None,
    neural_similarity: str = "cosine",
    meta: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> Iterator[ElasticsearchEngine]:
    """An engine on a new index (``esrerank-eval-<random>`` unless named), deleted after unless ``keep``."""
    client = conn.client()
    call(f"connecting to {conn.url}", client.info)
    name = index or f"esrerank-eval-{uuid.uuid4().hex[:10]}"
    engine = ElasticsearchEngine(client, name, tokens, params=params, embed=embed, dimension=dimension,
                                 neural_similarity=neural_similarity, meta=meta, progress=progress)
    failed = True
    try:
        yield engine
        failed = False
    finally:
        if not keep:
            try:
                call(f"deleting {name}", client.options(ignore_status=404).indices.delete, index=name)
            except UserError:
                if not failed:  # on the way out of an error, that error is the one to report
                    raise
