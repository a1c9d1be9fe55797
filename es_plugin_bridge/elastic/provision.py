"""``es setup``'s work below the CLI: the questions index, the sidecar's inference endpoints and the
ingest pipeline, for the product's own layout or from a user's index (``elastic/user_index.py``).

Every step says what it did in one line (``Provisioned.lines``), including which modes run on this
cluster and why the others do not; nothing is created before the model directory, the sidecar and the
user's fields are checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.elastic import mappings
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo, call
from es_plugin_bridge.elastic.cluster.shards import ONE_SHARD, IndexLayout
from es_plugin_bridge.elastic.modes import readiness_lines, require
from es_plugin_bridge.elastic.setup import (
    META_KEY,
    IndexMeta,
    register_embedding,
    register_endpoints,
)
from es_plugin_bridge.elastic.user_index import (
    SourceIndex,
    copy_into,
    describe,
    extend_in_place,
    in_place_properties,
)
from es_plugin_bridge.errors import UserError

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.opensearch_client import OpenSearchClient
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient


@dataclass
class Provisioned:
    """What ``provision`` made, for the CLI to print."""

    index: str
    meta: IndexMeta
    cluster: ClusterInfo
    lines: list[str] = field(default_factory=list)

    @property
    def suggested_mode(self) -> str:
        """The mode ``es search`` will run on the index without ``--mode`` (``IndexMeta.suggested_mode``)."""
        return self.meta.suggested_mode(self.cluster)


@dataclass(frozen=True)
class FromIndex:
    """``--from-index THEIRS --title-field F --body-field G [--id-field H] [--in-place]``."""

    index: str
    title_field: str = "title"
    body_field: str = "body"
    id_field: str | None = None
    in_place: bool = False


def provision(
    client: SearchClient,
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
    layout: IndexLayout = ONE_SHARD,
) -> Provisioned:
    """Create (or, in place, extend) the questions index; register what this cluster can run.

    Elasticsearch embeds at ingest wherever the cluster can (the default, unchanged);
    ``embed_at_ingest`` only makes a cluster that cannot a one-line error before the index is made."""
    theirs, index, meta = _user_source(client, source, index, meta)
    if no_vectors:
        meta = replace(meta, dimension=None)
    in_place = source is not None and source.in_place
    _make_room(client, index, theirs if in_place else None, recreate)
    embedding, embed_off = register_embedding(client, index, meta, sidecar_from_es, token, cluster)
    if embed_at_ingest and not embedding.get("text_embedding"):
        raise UserError(f"--embed-at-ingest: Elasticsearch cannot embed at ingest here: {embed_off}")
    if theirs is not None and not embedding:
        raise UserError(f"--from-index needs Elasticsearch to embed the questions: {embed_off}")
    endpoints, native_off = register_endpoints(client, index, meta, sidecar_from_es, token, cluster)
    meta = replace(meta, inference=endpoints, embedding=embedding)
    done = Provisioned(index, meta, cluster)
    body = mappings.index_body(
        dimension=meta.dimension,
        neural_similarity=meta.neural_similarity,
        meta=meta.as_dict(),
        default_pipeline=None if in_place else embedding.get("pipeline"),
        analyzer=theirs.analyzer if theirs is not None else None,
        analysis=theirs.analysis if theirs is not None else None,
        **layout.body_options(),
    )
    if in_place:
        assert theirs is not None
        done.lines.append(extend_in_place(client, theirs, body["mappings"]["properties"], META_KEY,
                                          meta.as_dict(), embedding["pipeline"], progress=progress))
    else:
        call(f"creating index {index}", client.indices.create, index=index, **body)
        done.lines.append(
            f"created index {index} ({layout.describe()}) for {meta.model} ({meta.model_type}, "
            f"{'no vectors' if meta.dimension is None else f'{meta.dimension}-d vectors'}) on Elasticsearch "
            f"{cluster.version_text} ({cluster.licence} licence)"
        )
        if theirs is not None:
            done.lines.append(copy_into(client, theirs, index, embedding.get("pipeline"), progress=progress))
    done.lines += _mode_lines(cluster, meta, endpoints, native_off, embedding, embed_off)
    return done


def _user_source(client: SearchClient, source: FromIndex | None, index: str,
                 meta: IndexMeta) -> tuple[SourceIndex | None, str, IndexMeta]:
    """``--from-index``: their index described, the index the product writes (theirs, in place) and the
    meta that records where the questions come from; in place only BM25 is offered (their similarity
    settings are static: only the engine's default BM25 is on their field)."""
    if source is None:
        return None, index, meta
    theirs = describe(client, source.index, source.title_field, source.body_field, source.id_field)
    if source.in_place:
        index = source.index
        meta = replace(meta, fusion={k: v for k, v in meta.fusion.items() if k == "bm25"})
    return theirs, index, replace(meta, source=theirs.as_meta(source.in_place))


def _make_room(client: SearchClient, index: str, in_place: SourceIndex | None, recreate: bool) -> None:
    """Before anything is registered: in place, refuse when their index already has a product field;
    else the new index must not exist (``--recreate`` deletes it)."""
    if in_place is not None:
        in_place_properties(in_place, {})
    elif call("checking the index", client.indices.exists, index=index):
        if not recreate:
            raise UserError(f"index {index} already exists (--recreate deletes it first)")
        call(f"deleting {index}", client.indices.delete, index=index)


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
        lines.append(f"mode learned-hybrid: unavailable ({no_vectors}{hint})")
    else:
        lines.append(learned_hybrid_line(cluster, meta, "both windows in one _msearch, fused in the client"))
        how = ("one call (rescorer retriever)" if cluster.paid
               else f"two calls ({cluster.licence} licence: the linear retriever needs enterprise or trial)")
        lines.append(f"mode vectors: ready, {how}")
        lines.append("mode hybrid:  ready" if meta.neural_similarity == "cosine"
                     else "mode hybrid:  ready (exact knn only: Manhattan vectors have no HNSW similarity)")
    lines.append("mode bridge:  ready")
    return lines + readiness_lines(cluster, meta, ES_WRITTEN)


#: The Elasticsearch modes whose readiness line :func:`_mode_lines` writes itself (it says how they run);
#: every other mode's line is the registry's (``modes.readiness_lines``).
ES_WRITTEN = ("native", "vectors", "hybrid", "learned-hybrid", "bridge")
#: The same on OpenSearch (:func:`_opensearch_mode_lines`).
OPENSEARCH_WRITTEN = ("learned-hybrid", "vectors", "hybrid", "hybrid-rrf", "rerank", "bridge")


def provision_opensearch(client: OpenSearchClient, cluster: ClusterInfo, index: str, meta: IndexMeta, *,
                         sidecar: str,
                         token: str | None, recreate: bool = False, no_vectors: bool = False,
                         embed_at_ingest: bool = False, source: FromIndex | None = None,
                         progress: bool = True, layout: IndexLayout = ONE_SHARD) -> Provisioned:
    """``es setup`` on OpenSearch: the questions index (the same similarities, analyzer and fields as on
    Elasticsearch; the vector a k-NN ``knn_vector``, the BOW terms ``rank_features``) and the search
    pipeline through which OpenSearch calls the sidecar. ``es index`` embeds on the client, or, with
    ``embed_at_ingest``, OpenSearch does, in the index's default ingest pipeline
    (``elastic/opensearch_ingest.py``). With ``source`` (``--from-index``) the questions come from the
    user's index, copied or extended in place through that pipeline (OpenSearch embeds them: neural-search
    is there on any licence); a model without vectors gets a scripts-only pipeline for ``text`` and
    ``rerank_text``."""
    from es_plugin_bridge.elastic.credential_exposure import unsecured_line
    from es_plugin_bridge.elastic.modes.rerank import register_rerank

    theirs, index, meta = _user_source(client, source, index, meta)
    if no_vectors:
        meta = replace(meta, dimension=None)
    if embed_at_ingest and meta.no_vectors_reason is not None:
        raise UserError(f"--embed-at-ingest: nothing to embed ({meta.no_vectors_reason})")
    in_place = theirs if source is not None and source.in_place else None
    if in_place is not None and not in_place.knn:  # no graph can be added to their index: exact only
        meta = replace(meta, source={**meta.source, "hnsw": False})
    _make_room(client, index, in_place, recreate)
    registered = register_rerank(client, index, sidecar, token)
    needed = embed_at_ingest or theirs is not None
    embedding = _opensearch_pipeline(client, index, meta, sidecar, token, needed)
    meta = replace(meta, search_pipeline=registered["search_pipeline"], embedding=embedding)
    body = mappings.index_body(dimension=meta.dimension, neural_similarity=meta.neural_similarity,
                               meta=meta.as_dict(), knn_plugin=True,
                               default_pipeline=None if in_place else embedding.get("pipeline"),
                               analyzer=theirs.analyzer if theirs is not None else None,
                               analysis=theirs.analysis if theirs is not None else None,
                               knn_graph=meta.source.get("hnsw") is not False, **layout.body_options())
    done = Provisioned(index, meta, cluster)
    vectors = "no vectors" if meta.dimension is None else f"{meta.dimension}-d vectors"
    if in_place is not None:
        done.lines.append(extend_in_place(client, in_place, body["mappings"]["properties"], META_KEY,
                                          meta.as_dict(), embedding["pipeline"], progress=progress))
    else:
        call(f"creating index {index}", client.indices.create, index=index, **body)
        done.lines.append(f"created index {index} ({layout.describe()}) for {meta.model} "
                          f"({meta.model_type}, {vectors}) on {cluster.name}")
        if theirs is not None:
            done.lines.append(copy_into(client, theirs, index, embedding["pipeline"], progress=progress))
    done.lines.append(f"registered ml-commons model {registered['model_id']} (connector "
                      f"{registered['connector_id']}) calling {sidecar.rstrip('/')}/v1/rerank")
    exposed = unsecured_line(client, cluster.name, token)  # right after the line naming where it went
    done.lines += [exposed] if exposed is not None else []
    done.lines += _opensearch_mode_lines(cluster, meta, registered["search_pipeline"])
    return done


def _opensearch_pipeline(client: OpenSearchClient, index: str, meta: IndexMeta, sidecar: str,
                         token: str | None, needed: bool) -> dict[str, str]:
    """The index's ingest pipeline when ``needed`` (embedding at ingest, or questions from the user's
    index): one that embeds through the sidecar, or, for a model without vectors, the scripts that fill
    ``text`` and ``rerank_text`` only; {} when not needed."""
    from es_plugin_bridge.elastic.ingest_pipeline import text_pipeline_body
    from es_plugin_bridge.elastic.opensearch_ingest import pipeline_id, register_ingest_embedding
    from es_plugin_bridge.elastic.opensearch_ml import request

    if not needed:
        return {}
    if meta.no_vectors_reason is None:
        return register_ingest_embedding(client, index, sidecar, token, meta.neural_similarity,
                                         title_field=meta.title_field, body_field=meta.body_field,
                                         user_text=bool(meta.source))
    pipeline = pipeline_id(index)
    request(client, f"creating ingest pipeline {pipeline}", client.raw.ingest.put_pipeline, id=pipeline,
            body=text_pipeline_body(title_field=meta.title_field, body_field=meta.body_field))
    return {"pipeline": pipeline}


def _opensearch_embeds_line(meta: IndexMeta) -> str:
    """Who embeds the questions on OpenSearch: its ingest pipeline (and through what), or this client;
    for a user's index, what its pipeline filled and how later writes go through it."""
    embedding, source = meta.embedding, meta.source
    pipeline = embedding.get("pipeline")
    if not pipeline:
        return "OpenSearch embeds: no (es index embeds on the client through the sidecar's /v1/encode)"
    if source.get("in_place"):
        how = (f"filled {source['index']} by _update_by_query; send later writes to it with "
               f"?pipeline={pipeline}")
    else:
        how = "the index's default_pipeline: es index sends the text only"
    if not embedding.get("vector_model"):
        return f"ingest pipeline {pipeline}: text and rerank_text from your fields ({how})"
    return (f"OpenSearch embeds: ml-commons models {embedding['vector_model']} (vector) and "
            f"{embedding['bow_model']} (bow) calling {embedding['sidecar']}/v1/encode; ingest pipeline "
            f"{pipeline} ({how})")


def learned_hybrid_line(cluster: ClusterInfo, meta: IndexMeta, how: str) -> str:
    """Mode learned-hybrid's readiness line: ready (how, the fusion, --knn's default), or why not."""
    from es_plugin_bridge.core.hybrid_fusion import HybridFusion

    if meta.hybrid is None:
        return ("mode learned-hybrid: unavailable (the model records no learned hybrid: esrerank fit-hybrid "
                "MODEL_DIR, then es setup again)")
    try:
        require(cluster, "learned-hybrid")
    except UserError as exc:
        return f"mode learned-hybrid: unavailable ({exc})"
    return (f"mode learned-hybrid: ready, the default ({how}; {HybridFusion(**meta.hybrid).describe()}; "
            f"--knn {meta.default_knn})")


def _opensearch_mode_lines(cluster: ClusterInfo, meta: IndexMeta, pipeline: str) -> list[str]:
    """One line per mode on OpenSearch: ready (and how), or unavailable and why; then the modes that run
    on Elasticsearch only (from the registry)."""
    from es_plugin_bridge.elastic.modes import mode_names, vector_modes

    no_vectors = meta.no_vectors_reason
    lines = [_opensearch_embeds_line(meta)] if no_vectors is None or meta.embedding else []
    if no_vectors is None:
        how = "one hybrid query, the fitted normalization-processor in the request"
        lines.append(learned_hybrid_line(cluster, meta, how))
        lines.append("mode vectors: ready, two calls (OpenSearch has no linear or rescorer retriever)")
        try:
            require(cluster, "hybrid")
            off = meta.hnsw_off_reason
            lines.append("mode hybrid:  ready" + ("" if off is None else f" (--knn exact only: {off})"))
        except UserError as exc:
            lines.append(f"mode hybrid:  unavailable ({exc})")
        lines.append("mode hybrid-rrf: ready (the client fuses: OpenSearch has no rrf retriever)")
    else:
        hint = "; use rerank or bridge" if meta.pairwise else ""
        lines += [f"mode {mode}: unavailable ({no_vectors}{hint})" for mode in vector_modes()]
    lines += [f"mode rerank:  ready (search pipeline {pipeline})", "mode bridge:  ready"]
    lines += readiness_lines(cluster, meta, OPENSEARCH_WRITTEN)
    elsewhere = [mode for mode in mode_names() if mode not in mode_names(cluster.engine)]
    if elsewhere:
        lines.append(f"mode{'s' if len(elsewhere) > 1 else ''} {', '.join(elsewhere)}: Elasticsearch only")
    return lines


def setup_index(connection: Any, model_dir: Any, index: str, sidecar: Any, *, sidecar_from_es: str | None,
                recreate: bool, no_vectors: bool, embed_at_ingest: bool, source: FromIndex | None,
                progress: bool, layout: IndexLayout = ONE_SHARD) -> Provisioned:
    """``es setup``: the model directory checked against the sidecar that serves it (before the cluster is
    contacted), then the index and what this cluster (Elasticsearch or OpenSearch) can run on it.
    ``layout``: the shards and replicas of the index it creates (in place, the user's index keeps its own)."""
    if source is not None and source.in_place and layout != ONE_SHARD:
        raise UserError("--shards and --replicas shape a new index; with --in-place your index keeps its own "
                        "(OpenSearch fixes number_of_shards when an index is created)")
    from es_plugin_bridge.bridge.sidecar_client import SidecarClient
    from es_plugin_bridge.elastic.setup import check_sidecar, meta_for_model
    from es_plugin_bridge.serving.model_dir import ModelDirectory
    from es_plugin_bridge.text import TextOptions

    model = ModelDirectory.load(model_dir)  # verifies the manifest before anything is created
    ready = check_sidecar(SidecarClient.reaching(sidecar, timeout=max(sidecar.timeout, 10.0)), model)
    meta = meta_for_model(model, ready, TextOptions())
    opened = connection.open()
    client, cluster = opened.client, opened.info
    reached = sidecar_from_es or sidecar.url
    options = {"token": sidecar.token, "recreate": recreate, "no_vectors": no_vectors, "source": source,
               "progress": progress, "embed_at_ingest": embed_at_ingest, "layout": layout}
    return cluster.for_engine(  # each engine registers what it runs its own way
        elasticsearch=lambda: provision(client, cluster, index, meta, sidecar_from_es=reached, **options),
        opensearch=lambda: provision_opensearch(client, cluster, index, meta, sidecar=reached, **options))()

