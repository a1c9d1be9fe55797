"""A user's own index as the source of questions: ``es setup MODEL_DIR --from-index THEIRS``.

Two ways, the user chooses, on Elasticsearch and on OpenSearch alike (the calls below are the same
on both; OpenSearch embeds through ml-commons and neural-search, ``elastic/opensearch_ingest.py``):

- **copy** (default): a new questions index in the product's layout, filled from theirs by ``_reindex``
  through the ingest pipeline (the cluster embeds; their index is not touched). A reindex script
  maps their title, body and (optionally) id fields onto ``title``, ``body`` and ``_id``.
- **in place** (``--in-place``): the product's fields (``text``, ``rerank_text``, ``vector``, ``bow``) are
  added to their mapping and filled by ``_update_by_query`` through the pipeline; their documents,
  fields and ids stay as they are. Refused when their index already has a field of those names.

Either way the first stage is BM25 over **their analyzer** (the analyzer of their title field) on their
title and body text, not over the product's own tokens: Elasticsearch cannot run the product's text
pipeline. The learned β was fit on the product's tokens; ``benchmarks/user_analyzer.py`` measures what
that costs. In place, their index's similarity settings cannot change (static settings), so the first
stage is the engine's default BM25 (k1 1.2, b 0.75, the product's too) and LM-Dirichlet is not offered.

Request shapes: ``_reindex`` (``specification/_global/reindex/ReindexRequest.ts``: ``source``,
``dest`` with ``pipeline``, ``script``), ``_update_by_query`` (``pipeline``, ``conflicts``,
``wait_for_completion``), progress from ``GET _tasks/<id>`` (``status.total``/``created``/``updated``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from es_plugin_bridge.elastic.cluster.connection import call
from es_plugin_bridge.elastic.ingest_pipeline import PAINLESS_GET
from es_plugin_bridge.elastic.mappings import BOW_FIELD, RERANK_FIELD, TEXT_FIELD, VECTOR_FIELD
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient

#: The fields the product adds to an index; in place, none may exist in the user's mapping yet.
PRODUCT_FIELDS = (TEXT_FIELD, RERANK_FIELD, VECTOR_FIELD, BOW_FIELD)
TEXT_TYPES = ("text", "match_only_text")

REINDEX_SCRIPT = PAINLESS_GET + (
    "def t = get(ctx._source, params.title); def b = get(ctx._source, params.body); "
    "if (params.id != null) { def i = get(ctx._source, params.id); "
    "if (i != null) { ctx._id = i.toString(); } } "
    "ctx._source = ['title': t == null ? '' : t.toString(), 'body': b == null ? '' : b.toString()];"
)


@dataclass(frozen=True)
class SourceIndex:
    """What the product needs to know of the user's index."""

    index: str
    title_field: str
    body_field: str
    id_field: str | None
    analyzer: str
    analysis: dict[str, Any]
    properties: dict[str, Any]
    meta: dict[str, Any]
    #: OpenSearch: the index is a k-NN index (``index.knn``, a static setting), where a ``knn_vector`` added
    #: in place can have an HNSW graph; elsewhere its vectors can only be scored exactly.
    knn: bool = False

    def as_meta(self, in_place: bool) -> dict[str, Any]:
        return {"index": self.index, "title_field": self.title_field, "body_field": self.body_field,
                "id_field": self.id_field, "in_place": in_place, "analyzer": self.analyzer}


def field_mapping(properties: Mapping[str, Any], path: str) -> dict[str, Any] | None:
    """The mapping of a dotted field path (``question.title``) in a ``properties`` tree, or None."""
    node: Any = {"properties": properties}
    for part in path.split("."):
        node = (node.get("properties") or {}).get(part) if isinstance(node, Mapping) else None
        if node is None:
            return None
    return dict(node)


def describe(client: SearchClient, index: str, title_field: str, body_field: str,
             id_field: str | None) -> SourceIndex:
    """Read the user's mapping and analysis settings; UserError naming a missing or non-text field."""
    getter = client.options(ignore_status=404).indices.get
    answer = call(f"reading the mapping of {index}", getter, index=index)
    if answer.meta.status == 404 or not answer.body:
        raise UserError(f"--from-index {index}: no such index")
    if len(answer.body) != 1:
        raise UserError(f"--from-index {index} names {len(answer.body)} indices; name one index")
    body = next(iter(answer.body.values()))
    properties = dict((body.get("mappings") or {}).get("properties") or {})
    for option, path in (("--title-field", title_field), ("--body-field", body_field)):
        mapping = field_mapping(properties, path)
        if mapping is None:
            raise UserError(f"{option} {path}: index {index} has no such field")
        if mapping.get("type", "object") not in TEXT_TYPES:
            raise UserError(f"{option} {path}: a {mapping.get('type', 'object')} field, not text")
    if id_field is not None and field_mapping(properties, id_field) is None:
        raise UserError(f"--id-field {id_field}: index {index} has no such field")
    title = field_mapping(properties, title_field) or {}
    settings = ((body.get("settings") or {}).get("index") or {})
    return SourceIndex(
        index=index,
        title_field=title_field,
        body_field=body_field,
        id_field=id_field,
        analyzer=str(title.get("analyzer") or default_analyzer(settings)),
        analysis=dict(settings.get("analysis") or {}),
        properties=properties,
        meta=dict((body.get("mappings") or {}).get("_meta") or {}),
        knn=str(settings.get("knn", "false")).lower() == "true",
    )


def default_analyzer(index_settings: Mapping[str, Any]) -> str:
    """The analyzer a text field without one uses: the index's ``default`` analyzer if it defines one,
    else ``standard`` (Elasticsearch's ``IndexAnalyzers`` default)."""
    defined = ((index_settings.get("analysis") or {}).get("analyzer") or {})
    return "default" if "default" in defined else "standard"


def reindex_body(source: SourceIndex, dest: str, pipeline: str | None) -> dict[str, Any]:
    """``POST _reindex`` body: their documents into ``dest`` as title/body (and id), through ``pipeline``."""
    destination: dict[str, Any] = {"index": dest}
    if pipeline:
        destination["pipeline"] = pipeline
    return {
        "source": {"index": source.index},
        "dest": destination,
        "script": {"lang": "painless", "source": REINDEX_SCRIPT,
                   "params": {"title": source.title_field, "body": source.body_field, "id": source.id_field}},
    }


def in_place_properties(source: SourceIndex, index_properties: Mapping[str, Any]) -> dict[str, Any]:
    """The product's fields to add to the user's mapping: ``text`` with their analyzer and the default
    similarity (BM25), and ``rerank_text``, ``vector``, ``bow`` as in the product's own index."""
    taken = [name for name in PRODUCT_FIELDS if name in source.properties]
    if taken:
        raise UserError(
            f"index {source.index} already has field(s) {', '.join(taken)}; --in-place would overwrite them. "
            "Leave out --in-place to copy into a new index instead"
        )
    added = {name: dict(index_properties[name]) for name in PRODUCT_FIELDS if name in index_properties}
    added[TEXT_FIELD] = {"type": "text", "analyzer": source.analyzer}
    return added


def wait_for_task(client: SearchClient, task_id: str, what: str, *, poll: float = 1.0,
                  progress: bool = True) -> dict:
    """Follow a ``wait_for_completion=false`` task to its end with a progress bar; its final status.

    UserError when the task reports failures (the first one named) or an error.
    """
    done = 0
    with tqdm(desc=what, unit="doc", file=sys.stderr, disable=None if progress else True) as bar:
        while True:
            task = call(f"following {what}", client.tasks.get, task_id=task_id)
            status = (task.get("task") or {}).get("status") or {}
            if status.get("total"):
                bar.total = status["total"]
            now = sum(int(status.get(k, 0)) for k in ("created", "updated", "deleted", "noops"))
            bar.update(max(0, now - done))
            done = now
            if task.get("completed"):
                break
            time.sleep(poll)
    if task.get("error"):
        error = task["error"]
        raise UserError(f"{what} failed: {error.get('type')}: {error.get('reason')}")
    response = task.get("response") or {}
    failures = response.get("failures") or []
    if failures:
        first = failures[0]
        cause = first.get("cause") or {}
        raise UserError(f"{what}: {len(failures)} documents failed (first {first.get('id')!r}: "
                        f"{cause.get('type')}: {cause.get('reason')}); nothing else was skipped")
    return response


def copy_into(client: SearchClient, theirs: SourceIndex, index: str, pipeline: str | None, *,
              progress: bool) -> str:
    """Copy: ``_reindex`` their documents into the new ``index`` through ``pipeline``, followed to its end
    (any failed document fails the run, naming the first); the line saying what was copied."""
    task = call(f"copying {theirs.index} into {index}", client.reindex,
                **reindex_body(theirs, index, pipeline), wait_for_completion=False)
    response = wait_for_task(client, task["task"], f"_reindex {theirs.index} → {index}", progress=progress)
    call(f"refreshing {index}", client.indices.refresh, index=index)
    copied = response.get("created", 0) + response.get("updated", 0)
    return f"copied {copied} questions from {theirs.index} (their index is unchanged)"


def extend_in_place(client: SearchClient, theirs: SourceIndex, properties: Mapping[str, Any], meta_key: str,
                    meta: Mapping[str, Any], pipeline: str, *, progress: bool) -> str:
    """In place: add the product's fields (from the product's own ``properties``) and ``_meta[meta_key]``
    to their index, keeping their ``_meta``; then fill every document through ``pipeline``."""
    added = in_place_properties(theirs, properties)
    merged_meta = {**theirs.meta, meta_key: dict(meta)}  # _meta is replaced whole: keep theirs
    call(f"adding the reranker's fields to {theirs.index}", client.indices.put_mapping, index=theirs.index,
         properties=added, meta=merged_meta)
    task = call(f"embedding the questions of {theirs.index}", client.update_by_query, index=theirs.index,
                pipeline=pipeline, conflicts="proceed", wait_for_completion=False)
    wait_for_task(client, task["task"], f"_update_by_query {theirs.index}", progress=progress)
    call(f"refreshing {theirs.index}", client.indices.refresh, index=theirs.index)
    return f"added the reranker's fields to {theirs.index} and filled them (_update_by_query)"
