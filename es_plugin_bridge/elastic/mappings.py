"""The questions index: settings and mappings, generated from the embedded engine's own parameters.

One source of truth: the similarities take their parameters from
``es_plugin_bridge.engines.similarities`` (the embedded engine's defaults plus any ``--param``), so the
six Lucene baselines score the same in Elasticsearch as in process. ``mappings/`` holds these bodies
as written by ``python -m es_plugin_bridge.elastic.write_mappings``; a test checks they are current.

Fields of a question document:
- ``title``, ``body``: the question as given (standard analyzer, for people and Kibana);
- ``text``: the product's own preprocessing of title + cut body, tokens joined by spaces and indexed
  with a whitespace tokenizer, so Elasticsearch sees exactly the embedded engine's tokens. Its
  similarity is BM25; the multi-fields ``text.lmdirichlet`` ... ``text.tfidf`` carry the other five;
- ``rerank_text``: title then HTML body, the string Elasticsearch sends to the sidecar (mode native);
- ``vector``: the model's neural vector (``dense_vector``, sized from the model directory; on OpenSearch
  the k-NN plugin's ``knn_vector``);
- ``bow``: the weighted bag of words as ``rank_features`` (mode vectors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from es_plugin_bridge.core.direction import has_direction as has_direction
from es_plugin_bridge.core.features import MIN_FEATURE as MIN_FEATURE
from es_plugin_bridge.core.features import bow_features
from es_plugin_bridge.core.features import feature_key as feature_key
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.engines.similarities import NORMALIZATION_PARAMS, SIMILARITIES, make_similarity
from es_plugin_bridge.text.sidecar_text import rerank_text

ANALYZER = "esrerank_tokens"
TOKENIZER = "esrerank_whitespace"
MAX_TOKEN_CHARS = 8191
TEXT_FIELD = "text"
RERANK_FIELD = "rerank_text"
VECTOR_FIELD = "vector"
BOW_FIELD = "bow"

#: The field whose similarity each first stage scores with.
FIELDS: dict[str, str] = {
    name: TEXT_FIELD if name == "bm25" else f"{TEXT_FIELD}.{name}" for name in SIMILARITIES
}

_ES_TYPES = {
    "bm25": "BM25",
    "lmdirichlet": "LMDirichlet",
    "lmjelinekmercer": "LMJelinekMercer",
    "dfr": "DFR",
    "ib": "IB",
}

# Lucene 7+'s ClassicSimilarity, as the scripted similarity of Elasticsearch's reference
# ("Similarity module", scripted TF-IDF with weight_script): sqrt(tf) · idf / sqrt(dl), idf once.
TFIDF_SIMILARITY: dict[str, Any] = {
    "type": "scripted",
    "weight_script": {
        "source": "double idf = Math.log((field.docCount+1.0)/(term.docFreq+1.0)) + 1.0; "
        "return query.boost * idf;"
    },
    "script": {
        "source": "double tf = Math.sqrt(doc.freq); double norm = 1/Math.sqrt(doc.length); "
        "return weight * tf * norm;"
    },
}


def similarity_name(similarity: str) -> str:
    return f"esrerank_{similarity}"


def similarity_setting(similarity: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Elasticsearch's definition of one similarity, with the embedded engine's parameter values."""
    if similarity == "tfidf":
        make_similarity("tfidf", **dict(params or {}))  # refuses parameters: ClassicSimilarity has none
        return dict(TFIDF_SIMILARITY)
    values = make_similarity(similarity, **dict(params or {})).params
    setting: dict[str, Any] = {"type": _ES_TYPES[similarity]}
    for key, value in values.items():
        if key.startswith("normalization."):
            continue
        setting[key] = value
    kind = values.get("normalization")
    if kind is not None and NORMALIZATION_PARAMS.get(kind):
        key = NORMALIZATION_PARAMS[kind][0]
        setting[key] = values[key]
    return setting


def vector_property(dimension: int, neural_similarity: str) -> dict[str, Any]:
    """Elasticsearch's ``vector`` field: a ``dense_vector``, indexed for ``knn`` under cosine."""
    if neural_similarity == "cosine":
        # hnsw (not the quantised default) keeps the indexed vectors exact for knn as well.
        return {"type": "dense_vector", "element_type": "float", "dims": dimension, "index": True,
                "similarity": "cosine", "index_options": {"type": "hnsw"}}
    # Manhattan models: scored by script only (no knn similarity is an L1 distance)
    return {"type": "dense_vector", "element_type": "float", "dims": dimension, "index": False}


def opensearch_vector_property(dimension: int, neural_similarity: str, graph: bool = True) -> dict[str, Any]:
    """OpenSearch's ``vector`` field: the k-NN plugin's ``knn_vector`` (k-NN 2.19.1,
    ``index/mapper/KNNVectorFieldMapper.java``).

    Cosine: an HNSW graph of the ``lucene`` engine under ``cosinesimil`` (``engine/lucene/Lucene.java``
    lists the spaces it supports). Not ``faiss`` or ``nmslib`` (2.19's default engine is faiss): their JNI
    libraries are not in every k-NN build (not in Maven Central's zip), and a faiss index then hangs the
    node at its first flush (docs/opensearch.md). Manhattan: no method, so the field is the flat one
    (``FlatVectorFieldMapper``, indices from 2.17 on that are not ``index.knn``): doc values that the
    k-NN Painless functions read, no graph — as Elasticsearch's ``index: false``. ``graph`` False: flat
    for a cosine model too (a field added to an index that is not ``index.knn``, which cannot change).
    """
    if neural_similarity == "cosine" and graph:
        return {"type": "knn_vector", "dimension": dimension,
                "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"}}
    return {"type": "knn_vector", "dimension": dimension}


def index_body(
    *,
    dimension: int | None = None,
    neural_similarity: str = "cosine",
    params: Mapping[str, Mapping[str, Any]] | None = None,
    meta: Mapping[str, Any] | None = None,
    default_pipeline: str | None = None,
    analyzer: str | None = None,
    analysis: Mapping[str, Any] | None = None,
    knn_plugin: bool = False,
    knn_graph: bool = True,
    shards: int = 1,
    replicas: int | None = None,
) -> dict[str, Any]:
    """``PUT /<index>`` body: settings and mappings.

    ``shards``: primary shards (default 1: a small corpus needs no more; docs/scaling-out.md says when to
    raise it; every mode stays exact on any number, ``cluster/shards.py``). ``replicas``: copies of each
    shard on other nodes (None: the cluster's default, 1).

    Without ``dimension`` the index holds no vectors (first stages, modes native and bridge only).
    ``default_pipeline``: the ingest pipeline every write goes through (Elasticsearch embeds).
    ``analyzer``/``analysis``: a user's own analyzer (and the analysis settings that define it) for
    ``text``, whose first stage then reads the user's plain text instead of the product's tokens.
    ``knn_plugin``: the vector is the OpenSearch k-NN plugin's ``knn_vector`` (with ``index.knn`` on for
    its HNSW graph; ``knn_graph`` False: the flat field, no graph); everything else is the same on both
    engines.
    """
    params = params or {}
    similarities = {similarity_name(s): similarity_setting(s, params.get(s)) for s in SIMILARITIES}
    text_analyzer = analyzer or ANALYZER
    text_fields = {
        name: {"type": "text", "analyzer": text_analyzer, "similarity": similarity_name(name)}
        for name in SIMILARITIES
        if name != "bm25"
    }
    properties: dict[str, Any] = {
        "title": {"type": "text"},
        "body": {"type": "text"},
        TEXT_FIELD: {
            "type": "text",
            "analyzer": text_analyzer,
            "similarity": similarity_name("bm25"),
            "fields": text_fields,
        },
        RERANK_FIELD: {"type": "text", "index": False},
    }
    if dimension is not None:
        properties[VECTOR_FIELD] = (opensearch_vector_property(dimension, neural_similarity, knn_graph)
                                    if knn_plugin else vector_property(dimension, neural_similarity))
        properties[BOW_FIELD] = {"type": "rank_features"}
    mappings: dict[str, Any] = {"dynamic": "strict", "properties": properties}
    if meta:
        mappings["_meta"] = {"esrerank": dict(meta)}
    # The default whitespace tokenizer splits tokens longer than 255 characters; the embedded
    # engine never splits. 8,191 characters stay under Lucene's 32,766-byte term limit.
    ours = {
        "tokenizer": {TOKENIZER: {"type": "whitespace", "max_token_length": MAX_TOKEN_CHARS}},
        "analyzer": {ANALYZER: {"type": "custom", "tokenizer": TOKENIZER}},
    }
    merged: dict[str, Any] = {kind: dict(defs) for kind, defs in (analysis or {}).items()}
    for kind, defs in ours.items():
        merged.setdefault(kind, {}).update(defs)
    settings: dict[str, Any] = {"number_of_shards": int(shards), "similarity": similarities,
                                "analysis": merged}
    if replicas is not None:
        settings["number_of_replicas"] = int(replicas)
    if knn_plugin and knn_graph and dimension is not None and neural_similarity == "cosine":
        settings["index.knn"] = True  # the k-NN plugin builds a field's graph only in a knn index
    if default_pipeline:
        settings["default_pipeline"] = default_pipeline
    return {"settings": settings, "mappings": mappings}


def value_at(source: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted ``_source`` path (``question.title``), or None: how a user's own field
    paths are read here and, in Painless, by the ingest pipeline and the reindex script."""
    node: Any = source
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


#: The powers of ten a float64 holds exactly (10**22 is the last): ``float32_values``' exact range.
_POW10 = tuple(10.0 ** m for m in range(23))


def float32_values(vectors: Any) -> list[Any]:
    """Vectors' components as the engine stores them (float32), each written with the fewest digits that
    give that float32 back: ``0.006286511`` rather than its float64 expansion ``0.006286511128...``.
    Both parse to the same float32 (``dense_vector`` and ``knn_vector`` hold float32), and a question's
    ``_source`` shrinks by about 40 % where the vector is most of it (found by ``benchmarks/scale.py``: 10.6
    MB per 1,000 questions with 400-d vectors, against 7.4 MB where ml-commons wrote them at ingest).

    Any shape (one vector, or a batch's rows: a batch at once is ~7x faster than row by row). The digits
    are numpy's shortest repr (``astype(str)``, Dragon4), found without it for every component with a
    decimal exponent in [-14, 22]: for d = 1..9 significant digits, the d-digit decimal nearest the value
    (``rint(x * 10**m) / 10**m``, m = d - 1 - exponent: a correctly rounded division by an exact power of
    ten is that decimal's nearest float64) is kept where it gives the float32 back; any other component
    (outside that range, or none found) takes numpy's. ``tests/elastic/test_float32_values.py`` compares
    the two on every bit pattern class."""
    import numpy as np

    x = np.asarray(vectors, dtype=np.float32)
    flat = x.ravel()
    with np.errstate(invalid="ignore"):
        wide = flat.astype(np.float64)
    out = wide.copy()
    nonzero = np.isfinite(wide) & (wide != 0)
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log10(np.abs(np.where(nonzero, wide, 1.0)))).astype(np.int64)
    fast = nonzero & (exponent >= -14) & (exponent <= 22)
    todo = fast.copy()
    powers = np.asarray(_POW10)
    for digits in range(1, 10):
        if not todo.any():
            break
        m = np.where(todo, digits - 1 - exponent, 0)
        scale = powers[np.abs(m)]
        up = m >= 0
        nearest = np.rint(np.where(up, wide * scale, wide / scale))
        candidate = np.where(up, nearest / scale, nearest * scale)
        found = todo & (candidate.astype(np.float32) == flat)
        out[found] = candidate[found]
        todo &= ~found
    rest = (nonzero & ~fast) | todo
    if rest.any():
        out[rest] = flat[rest].astype(str).astype(np.float64)
    return out.reshape(x.shape).tolist()  # type: ignore[no-any-return]


def document(
    question: Question,
    tokens: list[str],
    embedding: Mapping[str, Any] | None = None,
    neural_similarity: str = "cosine",
    values: list[float] | None = None,
) -> dict[str, Any]:
    """The ``_source`` of one question (``embedding``: one item of the sidecar's ``/v1/encode``;
    ``values``: its vector through ``float32_values`` already, as ``documents`` does for a batch).

    Under ``cosine`` a zero vector is left out (Elasticsearch refuses to index it); the rescore
    script then scores that document's neural term as cosine 0, as the product does in process."""
    doc: dict[str, Any] = {
        "title": question.title,
        "body": question.body,
        TEXT_FIELD: " ".join(tokens),
        RERANK_FIELD: rerank_text(question),
    }
    if embedding is not None:
        if neural_similarity != "cosine" or has_direction(embedding["vector"]):
            doc[VECTOR_FIELD] = values if values is not None else float32_values(embedding["vector"])
        features = bow_features(embedding["terms"])
        if features:
            doc[BOW_FIELD] = features
    return doc


def documents(questions: Sequence[Question], tokens: Sequence[list[str]],
              embeddings: Sequence[Mapping[str, Any] | None], neural_similarity: str = "cosine"
              ) -> list[dict[str, Any]]:
    """``document`` of each question of a batch, their vectors written by one ``float32_values`` call
    (rows of one array; a batch whose vectors differ in length, which no model gives, goes row by row)."""
    vectors = [e["vector"] for e in embeddings if e is not None]
    rows: list[Any] = []
    if vectors and len({len(v) for v in vectors}) == 1:
        rows = float32_values(vectors)
    elif vectors:
        rows = [float32_values(v) for v in vectors]
    found = iter(rows)
    return [document(q, t, e, neural_similarity, next(found) if e is not None else None)
            for q, t, e in zip(questions, tokens, embeddings, strict=True)]
