"""Write ``mappings/elasticsearch/``: the index, inference-endpoint and query bodies as files.

    python -m es_plugin_bridge.elastic.write_mappings [--out mappings/elasticsearch]

The files are what the code sends (``tests/elastic/test_es_requests.py`` checks they are current), for people
who read or apply them by hand (Kibana Dev Tools, curl). Model-dependent values are examples: a
384-dimensional cosine model, β = {first_stage 0.3, bow 0.2, neural 0.5}, the sidecar at
``http://sidecar:8080`` (its service name in ``docker/docker-compose.yml``), the query
"How do I upgrade to 12.04?".
``esrerank es setup`` writes the real ones for a model into the cluster. By hand, the order is: the
endpoints (``PUT _inference/rerank|text_embedding|sparse_embedding/<id>``), the pipeline
(``PUT _ingest/pipeline/<id>``), then the index.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.defaults import DEFAULT_INDEX
from es_plugin_bridge.elastic import queries
from es_plugin_bridge.elastic.mappings import index_body
from es_plugin_bridge.elastic.modes.native import native_retriever
from es_plugin_bridge.elastic.modes.vectors import vectors_retriever
from es_plugin_bridge.elastic.setup import inference_endpoint, inference_id
from es_plugin_bridge.text import Preprocessor
from es_plugin_bridge.text.sidecar_text import rerank_text

EXAMPLE_BETA = {"first_stage": 0.3, "bow": 0.2, "neural": 0.5}
EXAMPLE_QUERY = Question("q", "How do I upgrade to 12.04?", "")
EXAMPLE_INDEX = DEFAULT_INDEX
DIMENSION = 384
COMPOSE_SIDECAR = "http://sidecar:8080"  # the sidecar service of docker/docker-compose.yml


def bodies() -> dict[str, Any]:
    """Every body by file name."""
    from es_plugin_bridge.elastic.ingest_pipeline import embedding_endpoint, pipeline_body
    from es_plugin_bridge.elastic.modes.hybrid import example_bodies as hybrid_examples

    tokens = Preprocessor().tokens(EXAMPLE_QUERY)
    vector = [round(DIMENSION**-0.5, 6)] * DIMENSION  # a unit vector (cosine needs a non-zero one)
    terms = {t: 0.5 for t in tokens}
    rest = queries.rest_of_fused(vector, terms, EXAMPLE_BETA, "cosine")
    window = 100
    return {
        "questions-index.json": index_body(dimension=DIMENSION, neural_similarity="cosine"),
        "questions-index-no-vectors.json": index_body(),
        "inference-endpoint-bm25.json": inference_endpoint(COMPOSE_SIDECAR, "bm25", None),
        "search-first-stage-bm25.json": {"query": queries.first_stage_query("bm25", tokens), "size": window},
        "search-native.json": {"retriever": native_retriever(
            similarity="bm25", tokens=tokens, query_text=rerank_text(EXAMPLE_QUERY),
            inference_id=inference_id(EXAMPLE_INDEX, "bm25"), beta_first_stage=EXAMPLE_BETA["first_stage"],
            window=window), "size": 10},
        "search-vectors-trial.json": {"retriever": vectors_retriever(
            similarity="bm25", tokens=tokens, rest=rest, beta_first_stage=EXAMPLE_BETA["first_stage"],
            window=window), "size": 10},
        "search-vectors-basic.json": {"query": queries.first_stage_query("bm25", tokens), "size": 10,
                                      "rescore": queries.rescore(rest, window, 0.042)},
        "search-hybrid.json": hybrid_examples("bm25", tokens, vector, terms, EXAMPLE_BETA, window),
        "inference-endpoint-embed.json": embedding_endpoint(COMPOSE_SIDECAR, None, "text_embedding"),
        "inference-endpoint-bow.json": embedding_endpoint(COMPOSE_SIDECAR, None, "sparse_embedding"),
        "ingest-pipeline.json": pipeline_body(
            embed_id=inference_id(EXAMPLE_INDEX, "embed"), bow_id=inference_id(EXAMPLE_INDEX, "bow"),
            neural_similarity="cosine"),
        "questions-index-with-pipeline.json": index_body(
            dimension=DIMENSION, neural_similarity="cosine",
            default_pipeline=inference_id(EXAMPLE_INDEX, "ingest")),
    }


def render(body: Any) -> str:
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("mappings/elasticsearch"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, body in bodies().items():
        (args.out / name).write_text(render(body), encoding="utf-8")
        print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()
