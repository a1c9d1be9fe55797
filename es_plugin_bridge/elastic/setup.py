"""``es setup``: create the questions index for a model and register the sidecar as an inference endpoint.

What a later command needs to search the index in any mode is stored in the index's ``_meta``
(``esrerank``): the model's name and type, the vectors' dimension and similarity, the fusion β per
first stage, the text options that made the ``text`` field, and the inference endpoint per first
stage. So ``es index``/``es search``/``es evaluate`` need the index and the sidecar, not the model
directory.

A *pairwise* model (``ModelDirectory.pairwise``: a cross-encoder reads a query and a document together)
has no vector per text: its index stores none (``dimension`` None, ``pairwise`` true in ``_meta``), the
sidecar's token is checked on ``/v1/rerank`` (it refuses ``/v1/encode``), and only the modes that call
``/v1/rerank`` run on it (native, bridge).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from es_plugin_bridge.bridge.sidecar_client import SidecarClient
from es_plugin_bridge.core.fusion import FIRST_STAGES
from es_plugin_bridge.elastic.cluster.connection import ClusterInfo, call, es_errors
from es_plugin_bridge.elastic.modes import require
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text import TextOptions

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.cluster.search_client import SearchClient

META_KEY = "esrerank"
META_FORMAT = 1
RERANK_RESPONSE = {"relevance_score": "$.results[*].relevance_score", "reranked_index": "$.results[*].index"}
# ${query} arrives JSON-quoted; no ${top_n}/${return_documents}: the search-time call sends neither.
RERANK_REQUEST = '{"query": ${query}, "documents": ${input}}'


#: ``MlStrings.isValidId`` (x-pack/plugin/core/.../ml/utils/MlStrings.java), which ``PUT _inference``
#: applies to the endpoint id: lowercase alphanumerics, ``_``, ``-``, ``.``, alphanumeric at both ends.
VALID_ID = re.compile(r"[a-z0-9](?:[a-z0-9_\-.]*[a-z0-9])?")
#: Seconds the client waits for ``PUT _inference`` (Elasticsearch's own ``timeout=60s`` plus a margin):
#: Elasticsearch calls the sidecar before it answers, so the usual 30 s request timeout is too short.
PUT_ENDPOINT_SECONDS = 90.0


def inference_id(index: str, purpose: str) -> str:
    """The endpoint id for ``index`` and ``purpose`` (a first stage, ``embed``, ``bow``).

    Index names may hold characters an endpoint id may not (``my+questions``); those become ``-`` and
    a short hash of the index name keeps two such names apart. Legal ids are kept as they were.
    """
    plain = f"esrerank-{index}-{purpose}"
    if VALID_ID.fullmatch(plain):
        return plain
    clean = re.sub(r"[^a-z0-9_.-]+", "-", index.lower()).strip("-_.") or "index"
    digest = hashlib.sha256(index.encode("utf-8")).hexdigest()[:8]
    return f"esrerank-{clean}-{digest}-{purpose}"


def inference_endpoint(sidecar_url: str, first_stage: str, token: str | None) -> dict[str, Any]:
    """``PUT _inference/rerank/<id>`` body of the ``custom`` service calling ``/v1/rerank?score=linear``.

    Shape: elasticsearch-specification ``inference/put_custom`` (``PutCustomRequestExample1.yaml``,
    Cohere-style rerank). ``score=linear`` makes the sidecar
    answer the linear rest of the fused score (≥ 0) instead of a probability, so the ``linear``
    retriever's sum keeps the fused order. ``secret_parameters`` is required even without a token.
    """
    url = f"{sidecar_url.rstrip('/')}/v1/rerank?score=linear&first_stage={first_stage}"
    return {
        "service": "custom",
        "service_settings": {
            "url": url,
            "headers": {"Authorization": "Bearer ${api_key}", "Content-Type": "application/json"},
            "secret_parameters": {"api_key": token or "no-token"},
            "request": RERANK_REQUEST,
            "response": {"json_parser": dict(RERANK_RESPONSE)},
        },
    }


@dataclass(frozen=True)
class IndexMeta:
    """The ``_meta.esrerank`` of a questions index."""

    model: str
    model_type: str
    dimension: int | None
    neural_similarity: str
    fusion: dict[str, dict[str, float]]
    text: dict[str, Any]
    inference: dict[str, str] = field(default_factory=dict)
    params: dict[str, dict[str, float]] = field(default_factory=dict)
    #: The cluster embeds at ingest, or {} (es index embeds on the client). Elasticsearch:
    #: {"text_embedding": id, "sparse_embedding": id, "pipeline": id}; OpenSearch
    #: (``elastic/opensearch_ingest.py``): {"pipeline", "sidecar", "vector_model", "vector_connector",
    #: "bow_model", "bow_connector"}.
    embedding: dict[str, str] = field(default_factory=dict)
    #: Where the questions come from: {} for the product's own layout, or the user's index and fields
    #: ({"index", "title_field", "body_field", "id_field", "in_place", "analyzer"}).
    source: dict[str, Any] = field(default_factory=dict)
    #: The model reads (query, document) pairs and has no vector per text (a cross-encoder); an index
    #: written before this key existed reads as False, which it was.
    pairwise: bool = False
    #: OpenSearch: the search pipeline whose ``rerank`` processor calls the sidecar (mode rerank).
    search_pipeline: str | None = None
    #: sha256 of the model directory's manifest.json (``core/manifest.py``): which exact model made the
    #: index, so ``es index --vectors`` refuses a file embedded by another (None: set up before it existed).
    manifest_sha256: str | None = None
    #: The model's learned hybrid (``core.hybrid_fusion.HybridFusion`` as a dict; config.json's ``hybrid``),
    #: which mode learned-hybrid sends as the engine's pipeline; None: the model records none.
    hybrid: dict[str, Any] | None = None

    @property
    def no_vectors_reason(self) -> str | None:
        """Why the index holds no vectors (for the lines and refusals that name it), or None if it does."""
        if self.pairwise:
            return (f"{self.model} ({self.model_type}) reads a query and a document together and has no "
                    "vector per text")
        if self.dimension is None:
            return "the index holds no vectors (--no-vectors)"
        return None

    def suggested_mode(self, cluster: ClusterInfo) -> str:
        """The mode ``es search`` runs on this index without ``--mode`` (and ``es setup``'s last line
        names): the first ready on ``cluster`` (``ModeSpec.unavailable``) in the modes' ``suggest`` order —
        the learned hybrid where the index holds vectors and the model records its fit
        (benchmarks/engine_hybrid.py: the best of every mode and of the engine's own hybrids, at the
        engine's speed); else rerank where OpenSearch has a search pipeline for the index, hybrid where it
        holds vectors, native where it has an endpoint and the licence (a pairwise model, or
        --no-vectors), else bridge (runs anywhere)."""
        from es_plugin_bridge.elastic.modes import suggested_mode

        return suggested_mode(cluster, self)

    @property
    def hnsw_off_reason(self) -> str | None:
        """Why the index's vectors have no HNSW graph (``--knn hnsw`` cannot search them), or None."""
        if self.neural_similarity != "cosine":
            return (f"{self.model} compares vectors by {self.neural_similarity} distance, which no knn "
                    "similarity computes")
        if self.source.get("hnsw") is False:
            return (f"the vectors were added in place to {self.source.get('index')}, which is not a k-NN "
                    "index (index.knn is a static setting), so they have no HNSW graph")
        return None

    @property
    def default_knn(self) -> str:
        """How the vector modes search the vectors without ``--knn``: HNSW wherever the index has a graph
        (78 ms against 1,217 ms p50 for a million questions, benchmarks/scale.json), else exact."""
        return "exact" if self.hnsw_off_reason is not None else "hnsw"

    @property
    def title_field(self) -> str:
        return str(self.source.get("title_field", "title")) if self.source.get("in_place") else "title"

    @property
    def body_field(self) -> str:
        return str(self.source.get("body_field", "body")) if self.source.get("in_place") else "body"

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": META_FORMAT,
            "model": self.model,
            "model_type": self.model_type,
            "dimension": self.dimension,
            "neural_similarity": self.neural_similarity,
            "fusion": self.fusion,
            "text": self.text,
            "inference": self.inference,
            "params": self.params,
            "embedding": self.embedding,
            "source": self.source,
            "pairwise": self.pairwise,
            "search_pipeline": self.search_pipeline,
            "manifest_sha256": self.manifest_sha256,
            "hybrid": self.hybrid,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], index: str) -> IndexMeta:
        if data.get("format") != META_FORMAT:
            raise UserError(f"index {index} was not created by `esrerank es setup` (no _meta.{META_KEY})")
        return cls(
            model=data["model"],
            model_type=data["model_type"],
            dimension=data.get("dimension"),
            neural_similarity=data.get("neural_similarity", "cosine"),
            fusion=dict(data["fusion"]),
            text=dict(data["text"]),
            inference=dict(data.get("inference") or {}),
            params=dict(data.get("params") or {}),
            embedding=dict(data.get("embedding") or {}),
            source=dict(data.get("source") or {}),
            pairwise=bool(data.get("pairwise", False)),
            search_pipeline=data.get("search_pipeline"),
            manifest_sha256=data.get("manifest_sha256"),
            hybrid=dict(data["hybrid"]) if data.get("hybrid") else None,
        )

    def beta(self, first_stage: str) -> dict[str, float]:
        if first_stage not in self.fusion:
            raise UserError(
                f"the model has no β for first stage {first_stage!r} "
                f"(it has: {', '.join(sorted(self.fusion))})"
            )
        return self.fusion[first_stage]

    def text_options(self) -> TextOptions:
        return TextOptions.from_mapping(self.text, source="the index's _meta.esrerank.text")


def read_meta(client: SearchClient, index: str) -> IndexMeta:
    """The index's ``_meta.esrerank``; UserError when the index is missing or not ours."""
    getter = client.options(ignore_status=404).indices.get_mapping
    answer = call(f"reading index {index}", getter, index=index)
    if answer.meta.status == 404:
        raise UserError(f"index {index} does not exist (create it with `esrerank es setup MODEL_DIR`)")
    mapping = next(iter(answer.values()))["mappings"]
    return IndexMeta.from_dict((mapping.get("_meta") or {}).get(META_KEY) or {}, index)


def _check_serves(config: Any, readyz: Mapping[str, Any]) -> None:
    """UserError when the sidecar's ``/readyz`` names another model type or dimension than ``config``."""
    if int(readyz.get("dimension", -1)) != config.dimension or readyz.get("model_type") != config.model_type:
        raise UserError(
            f"the sidecar serves {readyz.get('model_type')} (dimension {readyz.get('dimension')}), "
            f"not this model directory's {config.model_type} (dimension {config.dimension})"
        )


def meta_for_model(model_dir: Any, readyz: Mapping[str, Any], text: TextOptions) -> IndexMeta:
    """The index meta of a loaded model directory, checked against what the sidecar serves.

    A pairwise directory gets no vector dimension: there is nothing per text to store, so the index is
    made as ``--no-vectors`` makes it, and ``pairwise`` tells the later commands why."""
    config = model_dir.config
    _check_serves(config, readyz)
    pairwise = bool(model_dir.pairwise)
    return IndexMeta(
        model=str(readyz.get("model", config.model_type)),
        model_type=config.model_type,
        dimension=None if pairwise else config.dimension,
        neural_similarity=config.similarity,
        fusion={k: dict(v) for k, v in config.beta.fusion.items()},
        text=text.model_dump(),
        pairwise=pairwise,
        manifest_sha256=_manifest_of(model_dir),
        hybrid=None if pairwise or config.hybrid is None else config.hybrid.model_dump(mode="json"),
    )


def _manifest_of(model_dir: Any) -> str | None:
    """The loaded directory's manifest digest (None where it went away since it was loaded)."""
    from es_plugin_bridge.core.manifest import manifest_digest

    try:
        return manifest_digest(model_dir.path)
    except (UserError, AttributeError):
        return None


def register_endpoints(
    client: SearchClient, index: str, meta: IndexMeta, sidecar_url: str, token: str | None,
    cluster: ClusterInfo,
) -> tuple[dict[str, str], str | None]:
    """Register one rerank endpoint per first stage with β; (ids, None) or ({}, why native is off).

    Elasticsearch calls the sidecar at registration (``?timeout=60s`` covers it), so a sidecar that
    Elasticsearch cannot reach fails here, with Elasticsearch's own reason.
    """
    try:
        require(cluster, "native")
    except UserError as exc:
        return {}, str(exc)
    ids = {}
    for stage in FIRST_STAGES:
        if stage not in meta.fusion:
            continue
        endpoint = inference_id(index, stage)
        _put_endpoint(client, "rerank", endpoint, inference_endpoint(sidecar_url, stage, token), sidecar_url)
        ids[stage] = endpoint
    return ids, None


def _put_endpoint(client: SearchClient, task_type: str, endpoint: str, body: dict[str, Any],
                  sidecar_url: str) -> None:
    """Replace endpoint ``endpoint`` by ``body``: Elasticsearch test-calls the sidecar before answering."""
    with es_errors(f"registering inference endpoint {endpoint} (Elasticsearch calls {sidecar_url})"):
        if client.options(ignore_status=404).inference.get(inference_id=endpoint).meta.status == 200:
            client.inference.delete(inference_id=endpoint, force=True)
        client.options(request_timeout=PUT_ENDPOINT_SECONDS).inference.put(
            task_type=task_type, inference_id=endpoint, inference_config=body, timeout="60s"
        )


def register_embedding(
    client: SearchClient,
    index: str,
    meta: IndexMeta,
    sidecar_url: str,
    token: str | None,
    cluster: ClusterInfo,
) -> tuple[dict[str, str], str | None]:
    """The ``text_embedding`` and ``sparse_embedding`` endpoints and the ingest pipeline of ``index``
    (``elastic/ingest_pipeline.py``); (ids, None), or ({}, why Elasticsearch cannot embed here).

    The ``custom`` service needs 8.19/9.1+ and an enterprise or trial licence, as mode native does;
    without it ``es index`` embeds on the client, as before. An index with no vectors (``--no-vectors``
    or a pairwise model) registers no endpoint; if its questions come from the user's index it still
    gets a pipeline that only fills ``text`` and ``rerank_text`` (scripts: any licence), since
    ``_reindex``/``_update_by_query`` cannot run the product's text code: ({"pipeline": id}, why no
    embedding).
    """
    from es_plugin_bridge.elastic.ingest_pipeline import embedding_endpoint, pipeline_body, text_pipeline_body

    pipeline = inference_id(index, "ingest")
    no_vectors = meta.no_vectors_reason
    if no_vectors is not None:
        if not meta.source:
            return {}, no_vectors
        body = text_pipeline_body(title_field=meta.title_field, body_field=meta.body_field)
        call(f"creating ingest pipeline {pipeline}", client.ingest.put_pipeline, id=pipeline, **body)
        return {"pipeline": pipeline}, no_vectors
    try:
        require(cluster, "native")
    except UserError as exc:
        return {}, str(exc).replace("mode native", "Elasticsearch-side embedding", 1)
    ids = {kind: inference_id(index, purpose)
           for kind, purpose in (("text_embedding", "embed"), ("sparse_embedding", "bow"))}
    for kind, endpoint in ids.items():
        _put_endpoint(client, kind, endpoint, embedding_endpoint(sidecar_url, token, kind), sidecar_url)
    body = pipeline_body(embed_id=ids["text_embedding"], bow_id=ids["sparse_embedding"],
                         neural_similarity=meta.neural_similarity,
                         title_field=meta.title_field, body_field=meta.body_field,
                         user_text=bool(meta.source))
    call(f"creating ingest pipeline {pipeline}", client.ingest.put_pipeline, id=pipeline, **body)
    return {**ids, "pipeline": pipeline}, None


def check_sidecar(embedder: SidecarClient, model_dir: Any) -> dict[str, Any]:
    """``/readyz`` answers, the sidecar serves ``model_dir``'s model and the token works; the readiness
    document. The token is tried on an endpoint that model serves: ``/v1/rerank`` for a pairwise model
    (it refuses ``/v1/encode``), ``/v1/encode`` otherwise (what ``es index`` will call)."""
    ready = embedder.ready()
    _check_serves(model_dir.config, ready)
    embedder.check_token(pairwise=bool(model_dir.pairwise))
    return ready
