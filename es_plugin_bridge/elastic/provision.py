"""``es setup``'s work below the CLI: the questions index, the sidecar's inference endpoints and the
ingest pipeline, for the product's own layout or from a user's index (``elastic/user_index.py``).

Every step says what it did in one line (``Provisioned.lines``), including which modes run on this
cluster and why the others do not; nothing is created before the model directory, the sidecar and the
user's fields are checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.connection import ClusterInfo, call
from es_plugin_bridge.elastic.setup import (
    META_KEY,
    IndexMeta,
    register_embedding,
    register_endpoints,
)
from es_plugin_bridge.elastic.user_index import (
    SourceIndex,
    describe,
    in_place_properties,
    reindex_body,
    wait_for_task,
)
from es_plugin_bridge.errors import UserError


@dataclass
class Provisioned:
    """What ``provision`` made, for the CLI to print."""

    index: str
    meta: IndexMeta
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FromIndex:
    """``--from-index THEIRS --title-field F --body-field G [--id-field H] [--in-place]``."""

    index: str
    title_field: str = "title"
    body_field: str = "body"
    id_field: str | None = None
    in_place: bool = False


def provision(
    client: Any,
    cluster: ClusterInfo,
    index: str,
    meta: IndexMeta,
    *,
    sidecar_from_es: str,
    token: str | None,
    recreate: bool = False,
    no_vectors: bool = False,
    source: FromIndex | None = None,
    progress: bool = True,
    embed_at_ingest: bool = False,
) -> Provisioned:
    """Create (or, in place, extend) the questions index; register what this cluster can run.

    Elasticsearch embeds at ingest wherever the cluster can (the default, unchanged);
    ``embed_at_ingest`` only makes a cluster that cannot a one-line error before the index is made."""
    theirs: SourceIndex | None = None
    if source is not None:
        theirs = describe(client, source.index, source.title_field, source.body_field, source.id_field)
        if source.in_place:
            index = source.index
            # their similarity settings are static: only Elasticsearch's default BM25 is on their field
            meta = replace(meta, fusion={k: v for k, v in meta.fusion.items() if k == "bm25"})
        meta = replace(meta, source=theirs.as_meta(source.in_place))
    if no_vectors:
        meta = replace(meta, dimension=None)
    in_place = source is not None and source.in_place
    if in_place:
        in_place_properties(theirs, {})  # refuses before anything is created when a field is taken
    elif call("checking the index", client.indices.exists, index=index):
        if not recreate:
            raise UserError(f"index {index} already exists (--recreate deletes it first)")
        call(f"deleting {index}", client.indices.delete, index=index)
    embedding, embed_off = register_embedding(client, index, meta, sidecar_from_es, token, cluster)
    if embed_at_ingest and not embedding.get("text_embedding"):
        raise UserError(f"--embed-at-ingest: Elasticsearch cannot embed at ingest here: {embed_off}")
    if theirs is not None and not embedding:
        raise UserError(f"--from-index needs Elasticsearch to embed the questions: {embed_off}")
    endpoints, native_off = register_endpoints(client, index, meta, sidecar_from_es, token, cluster)
    meta = replace(meta, inference=endpoints, embedding=embedding)
    done = Provisioned(index, meta)
    body = mappings.index_body(
        dimension=meta.dimension,
        neural_similarity=meta.neural_similarity,
        meta=meta.as_dict(),
        default_pipeline=None if in_place else embedding.get("pipeline"),
        analyzer=theirs.analyzer if theirs is not None else None,
        analysis=theirs.analysis if theirs is not None else None,
    )
    if in_place:
        _extend_in_place(client, theirs, body, meta, progress)  # type: ignore[arg-type]
        done.lines.append(f"added the reranker's fields to {index} and filled them (_update_by_query)")
    else:
        call(f"creating index {index}", client.indices.create, index=index, **body)
        done.lines.append(
            f"created index {index} for {meta.model} ({meta.model_type}, "
            f"{'no vectors' if meta.dimension is None else f'{meta.dimension}-d vectors'}) on Elasticsearch "
            f"{cluster.version_text} ({cluster.licence} licence)"
        )
        if theirs is not None:
            task = call(f"copying {theirs.index} into {index}", client.reindex,
                        **reindex_body(theirs, index, embedding.get("pipeline")), wait_for_completion=False)
            response = wait_for_task(client, task["task"], f"_reindex {theirs.index} → {index}",
                                     progress=progress)
            call(f"refreshing {index}", client.indices.refresh, index=index)
            done.lines.append(f"copied {response.get('created', 0) + response.get('updated', 0)} questions "
                              f"from {theirs.index} (their index is unchanged)")
    done.lines += _mode_lines(cluster, meta, endpoints, native_off, embedding, embed_off)
    return done


def _extend_in_place(client: Any, theirs: SourceIndex, body: dict[str, Any], meta: IndexMeta,
                     progress: bool) -> None:
    """Add the product's fields and ``_meta.esrerank`` to the user's index, then fill every document."""
    added = in_place_properties(theirs, body["mappings"]["properties"])
    merged_meta = {**theirs.meta, META_KEY: meta.as_dict()}  # _meta is replaced whole: keep theirs
    call(f"adding the reranker's fields to {theirs.index}", client.indices.put_mapping, index=theirs.index,
         properties=added, meta=merged_meta)
    task = call(f"embedding the questions of {theirs.index}", client.update_by_query, index=theirs.index,
                pipeline=meta.embedding["pipeline"], conflicts="proceed", wait_for_completion=False)
    wait_for_task(client, task["task"], f"_update_by_query {theirs.index}", progress=progress)
    call(f"refreshing {theirs.index}", client.indices.refresh, index=theirs.index)


def _mode_lines(cluster: ClusterInfo, meta: IndexMeta, endpoints: dict[str, str], native_off: str | None,
                embedding: dict[str, str], embed_off: str | None) -> list[str]:
    """What was registered, then one line per mode: ready, or unavailable and why."""
    lines = [f"registered inference endpoint {e} (first stage {s})" for s, e in endpoints.items()]
    no_vectors = meta.no_vectors_reason
    if embedding.get("text_embedding"):
        lines.append(f"Elasticsearch embeds: endpoints {embedding['text_embedding']} (vector), "
                     f"{embedding['sparse_embedding']} (bow); ingest pipeline {embedding['pipeline']}")
    elif no_vectors is not None:
        lines.append(f"Elasticsearch embeds: nothing to embed ({no_vectors}); es index sends the text only")
        if embedding.get("pipeline"):
            lines.append(f"ingest pipeline {embedding['pipeline']}: text and rerank_text from your fields")
    else:
        lines.append(f"Elasticsearch embeds: no ({embed_off}); es index embeds on the client")
    lines.append(f"mode native:  {'ready' if endpoints else 'unavailable: ' + str(native_off)}")
    if no_vectors is not None:
        # the reason is the model's when it has no vectors at all: --no-vectors would not help
        hint = "; use native or bridge" if meta.pairwise else ""
        lines.append(f"mode vectors: unavailable ({no_vectors}{hint})")
        lines.append(f"mode hybrid:  unavailable ({no_vectors}{hint})")
    else:
        how = ("one call (rescorer retriever)" if cluster.paid
               else f"two calls ({cluster.licence} licence: the linear retriever needs enterprise or trial)")
        lines.append(f"mode vectors: ready, {how}")
        lines.append("mode hybrid:  ready" if meta.neural_similarity == "cosine"
                     else "mode hybrid:  ready (exact knn only: Manhattan vectors have no HNSW similarity)")
    lines.append("mode bridge:  ready")
    return lines


def provision_opensearch(client: Any, cluster: ClusterInfo, index: str, meta: IndexMeta, *, sidecar: str,
                         token: str | None, recreate: bool = False, no_vectors: bool = False,
                         embed_at_ingest: bool = False) -> Provisioned:
    """``es setup`` on OpenSearch: the questions index (the same similarities, analyzer and fields as on
    Elasticsearch; the vector a k-NN ``knn_vector``, the BOW terms ``rank_features``) and the search
    pipeline through which OpenSearch calls the sidecar. ``es index`` embeds on the client, or, with
    ``embed_at_ingest``, OpenSearch does, in the index's default ingest pipeline
    (``elastic/opensearch_ingest.py``)."""
    from es_plugin_bridge.elastic.opensearch_ingest import register_ingest_embedding
    from es_plugin_bridge.elastic.opensearch_rerank import register_rerank

    if no_vectors:
        meta = replace(meta, dimension=None)
    if embed_at_ingest and meta.no_vectors_reason is not None:
        raise UserError(f"--embed-at-ingest: nothing to embed ({meta.no_vectors_reason})")
    if call("checking the index", client.indices.exists, index=index):
        if not recreate:
            raise UserError(f"index {index} already exists (--recreate deletes it first)")
        call(f"deleting {index}", client.indices.delete, index=index)
    registered = register_rerank(client, index, sidecar, token)
    embedding = (register_ingest_embedding(client, index, sidecar, token, meta.neural_similarity)
                 if embed_at_ingest else {})
    meta = replace(meta, search_pipeline=registered["search_pipeline"], embedding=embedding)
    body = mappings.index_body(dimension=meta.dimension, neural_similarity=meta.neural_similarity,
                               meta=meta.as_dict(), knn_plugin=True,
                               default_pipeline=embedding.get("pipeline"))
    call(f"creating index {index}", client.indices.create, index=index, **body)
    done = Provisioned(index, meta)
    vectors = "no vectors" if meta.dimension is None else f"{meta.dimension}-d vectors"
    done.lines += [
        f"created index {index} for {meta.model} ({meta.model_type}, {vectors}) on {cluster.name}",
        f"registered ml-commons model {registered['model_id']} (connector {registered['connector_id']}) "
        f"calling {sidecar.rstrip('/')}/v1/rerank",
        *_opensearch_mode_lines(cluster, meta, registered["search_pipeline"]),
    ]
    return done


def _opensearch_embeds_line(embedding: dict[str, str]) -> str:
    """Who embeds the questions on OpenSearch: its ingest pipeline (and through what), or this client."""
    if not embedding.get("pipeline"):
        return "OpenSearch embeds: no (es index embeds on the client through the sidecar's /v1/embed)"
    return (f"OpenSearch embeds: ml-commons models {embedding['vector_model']} (vector) and "
            f"{embedding['bow_model']} (bow) calling {embedding['sidecar']}/v1/embed; ingest pipeline "
            f"{embedding['pipeline']} (the index's default_pipeline): es index sends the text only")


def _opensearch_mode_lines(cluster: ClusterInfo, meta: IndexMeta, pipeline: str) -> list[str]:
    """One line per mode on OpenSearch: ready (and how), or unavailable and why; then the modes that run
    on Elasticsearch only (from the registry)."""
    from es_plugin_bridge.elastic.mode_registry import mode_names, vector_modes

    no_vectors = meta.no_vectors_reason
    if no_vectors is None:
        lines = [_opensearch_embeds_line(meta.embedding),
                 "mode vectors: ready, two calls (OpenSearch has no linear or rescorer retriever)"]
        try:
            cluster.require("hybrid")
            exact = " (exact knn only: Manhattan vectors have no HNSW)"
            lines.append("mode hybrid:  ready" + ("" if meta.neural_similarity == "cosine" else exact))
        except UserError as exc:
            lines.append(f"mode hybrid:  unavailable ({exc})")
        lines.append("mode hybrid-rrf: ready (the client fuses: OpenSearch has no rrf retriever)")
    else:
        hint = "; use rerank or bridge" if meta.pairwise else ""
        lines = [f"mode {mode}: unavailable ({no_vectors}{hint})" for mode in vector_modes()]
    lines += [f"mode rerank:  ready (search pipeline {pipeline})", "mode bridge:  ready"]
    elsewhere = [mode for mode in mode_names() if mode not in mode_names(cluster.engine)]
    if elsewhere:
        lines.append(f"mode{'s' if len(elsewhere) > 1 else ''} {', '.join(elsewhere)}: Elasticsearch only")
    return lines


def setup_index(connection: Any, model_dir: Any, index: str, sidecar: Any, *, sidecar_from_es: str | None,
                recreate: bool, no_vectors: bool, embed_at_ingest: bool, source: FromIndex | None,
                progress: bool) -> Provisioned:
    """``es setup``: the model directory checked against the sidecar that serves it (before the cluster is
    contacted), then the index and what this cluster (Elasticsearch or OpenSearch) can run on it."""
    from es_plugin_bridge.elastic.connection import cluster_info
    from es_plugin_bridge.elastic.setup import check_sidecar, meta_for_model
    from es_plugin_bridge.elastic.sidecar_embedder import SidecarEmbedder
    from es_plugin_bridge.serving.model_dir import ModelDirectory
    from es_plugin_bridge.text import TextOptions

    model = ModelDirectory.load(model_dir)  # verifies the manifest before anything is created
    ready = check_sidecar(SidecarEmbedder.reaching(sidecar, timeout=max(sidecar.timeout, 10.0)), model)
    meta = meta_for_model(model, ready, TextOptions())
    client = connection.client()
    cluster = cluster_info(client)
    reached = sidecar_from_es or sidecar.url
    if cluster.is_opensearch:
        if source is not None:
            raise UserError("--from-index is for Elasticsearch; on OpenSearch, index your questions with "
                            "`esrerank es index`")
        return provision_opensearch(client, cluster, index, meta, sidecar=reached, token=sidecar.token,
                                    recreate=recreate, no_vectors=no_vectors, embed_at_ingest=embed_at_ingest)
    return provision(client, cluster, index, meta, sidecar_from_es=reached, token=sidecar.token,
                     recreate=recreate, no_vectors=no_vectors, source=source, progress=progress,
                     embed_at_ingest=embed_at_ingest)

