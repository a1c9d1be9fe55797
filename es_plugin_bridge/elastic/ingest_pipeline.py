"""Elasticsearch embeds: two ``custom`` inference endpoints on the sidecar's ``/v1/encode`` and an ingest
pipeline that fills a question's ``rerank_text``, ``vector`` and ``bow`` at index time.

With them any client indexes with a plain ``_bulk`` (or ``_reindex`` / ``_update_by_query`` with
``pipeline``), and ``knn.query_vector_builder.text_embedding`` embeds a query inside Elasticsearch.

- ``text_embedding`` endpoint (the neural vector): response path ``$.embeddings[*].vector``, which
  ``MapPathExtractor`` reads as one list of floats per input (``services/custom/response/
  TextEmbeddingResponseParser.java``).
- ``sparse_embedding`` endpoint (the weighted bag of words): ``token_path``
  ``$.embeddings[*].bow_tokens`` and ``weight_path`` ``$.embeddings[*].bow_weights``, parallel lists per
  input (``SparseEmbeddingResponseParser.java``); the sidecar already writes the keys as ``rank_features``
  keys and the weights as their positive values, so the ``inference`` processor's output map goes into
  the ``rank_features`` field as it is.

Why ``rank_features`` and not ``sparse_vector`` with a query-time ``inference_id``: mode vectors must
send the query's neural vector to its rescore script as a parameter, which Elasticsearch cannot fill
from an endpoint, so the client embeds the query anyway, and the same call gives its BOW terms; the
``rank_feature`` clauses keep the exact, Lucene-checked BOW arithmetic
(``tests/elastic/test_lucene_es_queries.py``); a ``sparse_vector`` query would add a second inference
round trip inside Elasticsearch per query and prunes tokens by default from 9.1.

The pipeline (``Pipeline``, ``ScriptProcessor``, ``InferenceProcessor`` of the specification):
1. a script builds ``rerank_text`` from the title and body fields exactly as
   :func:`~es_plugin_bridge.elastic.rerank_text` does (``<`` in the title as ``&lt;``, a body
   not starting with a tag wrapped in ``<p>``, every ``${`` as ``&#36;{``): the inference processors
   send it through the endpoints' request templates, which refuse a leftover ``${…}``;
2. ``inference`` → ``vector`` (text_embedding), then ``inference`` → ``bow`` (sparse_embedding): an
   inference endpoint's id as ``model_id`` with ``input_output``, as Elasticsearch's tutorial "Semantic
   search with the inference API" does (its sparse output is a token → weight map, which ``bow``
   takes as ``rank_features``; verified only where the cluster tests run);
3. a script drops a zero vector under ``cosine`` (Elasticsearch refuses to index one) and an empty bag.

An index without vectors (``--no-vectors``, or a pairwise model: the cross-encoder) built from a user's
index gets only step 1 and the ``text`` scripts (:func:`text_pipeline_body`).
"""

from __future__ import annotations

from typing import Any

from es_plugin_bridge.elastic.mappings import BOW_FIELD, RERANK_FIELD, TEXT_FIELD, VECTOR_FIELD, value_at

#: ``${input}`` is the JSON array of the texts (``CustomRequest.addInputJsonParam``).
EMBED_REQUEST = '{"texts": ${input}}'
EMBED_RESPONSE = {"text_embeddings": "$.embeddings[*].vector"}
BOW_RESPONSE = {"token_path": "$.embeddings[*].bow_tokens", "weight_path": "$.embeddings[*].bow_weights"}

# Painless. ``lstrip`` of Python and ``trim`` of Java differ on Unicode spaces, so both sides strip
# only the characters <= U+0020 before testing for "<" (rerank_text does the same).
PAINLESS_GET = (
    "def get(Map m, String path) { def cur = m; "
    "for (String p : path.splitOnToken('.')) { if (!(cur instanceof Map)) { return null; } "
    "cur = ((Map) cur).get(p); } return cur; } "
)
RERANK_TEXT_SCRIPT = PAINLESS_GET + (
    "def t = get(ctx, params.title); def b = get(ctx, params.body); "
    "String title = t == null ? '' : t.toString(); String body = b == null ? '' : b.toString(); "
    "title = title.replace('<', '&lt;').replace(params.open, params.safe); "
    "body = body.replace(params.open, params.safe); "
    "int i = 0; while (i < body.length() && body.charAt(i) <= (char) 32) { i++; } "
    "if (body.isEmpty()) { ctx[params.out] = title; } "
    "else if (i < body.length() && body.charAt(i) == (char) 60) { ctx[params.out] = title + body; } "
    "else { ctx[params.out] = title + '<p>' + body + '</p>'; }"
)
#: A user's own index (``es setup --from-index``): the first stage reads title and body through the
#: user's analyzer, so ``text`` is their plain text (tags stripped by ``html_strip`` after it).
USER_TEXT_SCRIPT = PAINLESS_GET + (
    "def t = get(ctx, params.title); def b = get(ctx, params.body); "
    "ctx[params.out] = (t == null ? '' : t.toString()) + ' ' + (b == null ? '' : b.toString());"
)
CLEAN_SCRIPT = (
    "if (params.cosine && ctx[params.vector] instanceof List) { boolean zero = true; "
    "for (def x : ctx[params.vector]) { if (((Number) x).doubleValue() != 0.0) { zero = false; break; } } "
    "if (zero) { ctx.remove(params.vector); } } "
    "if (ctx[params.bow] instanceof Map && ((Map) ctx[params.bow]).isEmpty()) { ctx.remove(params.bow); }"
)


def embedding_endpoint(sidecar_url: str, token: str | None, task_type: str) -> dict[str, Any]:
    """``PUT _inference/<task_type>/<id>`` body of the ``custom`` service calling ``/v1/encode``."""
    if task_type not in ("text_embedding", "sparse_embedding"):
        raise ValueError(f"no embedding endpoint of task type {task_type!r}")
    response = EMBED_RESPONSE if task_type == "text_embedding" else BOW_RESPONSE
    return {
        "service": "custom",
        "service_settings": {
            "url": f"{sidecar_url.rstrip('/')}/v1/encode",
            "headers": {"Authorization": "Bearer ${api_key}", "Content-Type": "application/json"},
            "secret_parameters": {"api_key": token or "no-token"},
            "request": EMBED_REQUEST,
            "response": {"json_parser": dict(response)},
        },
    }


def text_processors(title_field: str, body_field: str, user_text: bool) -> list[dict[str, Any]]:
    """The scripts that fill ``text`` (``user_text``: from the user's fields) and ``rerank_text``."""
    first: list[dict[str, Any]] = []
    if user_text:
        first = [
            {"script": {"tag": "esrerank-text", "lang": "painless", "source": USER_TEXT_SCRIPT,
                        "params": {"title": title_field, "body": body_field, "out": TEXT_FIELD}}},
            {"html_strip": {"tag": "esrerank-text-html", "field": TEXT_FIELD}},
        ]
    return first + [
        {"script": {
            "tag": "esrerank-rerank-text",
            "lang": "painless",
            "source": RERANK_TEXT_SCRIPT,
            "params": {"title": title_field, "body": body_field, "out": RERANK_FIELD,
                       "open": "${", "safe": "&#36;{"},
        }},
    ]


def pipeline_body(
    *,
    embed_id: str,
    bow_id: str,
    neural_similarity: str,
    title_field: str = "title",
    body_field: str = "body",
    user_text: bool = False,
    description: str = "esrerank: rerank_text, vector and bow of a question, embedded by the sidecar",
) -> dict[str, Any]:
    """``PUT _ingest/pipeline/<id>`` body (see the module docstring); ``user_text`` also fills ``text``
    from the title and body fields, for an index whose first stage is the user's own analyzer."""
    return {
        "description": description,
        "processors": text_processors(title_field, body_field, user_text) + [
            {"inference": {
                "tag": "esrerank-vector",
                "model_id": embed_id,
                "input_output": {"input_field": RERANK_FIELD, "output_field": VECTOR_FIELD},
            }},
            {"inference": {
                "tag": "esrerank-bow",
                "model_id": bow_id,
                "input_output": {"input_field": RERANK_FIELD, "output_field": BOW_FIELD},
            }},
            {"script": {
                "tag": "esrerank-clean",
                "lang": "painless",
                "source": CLEAN_SCRIPT,
                "params": {"cosine": neural_similarity == "cosine", "vector": VECTOR_FIELD, "bow": BOW_FIELD},
            }},
        ],
    }


def text_pipeline_body(*, title_field: str = "title", body_field: str = "body") -> dict[str, Any]:
    """The pipeline of a user's index copied or extended for a model without vectors (``--no-vectors``,
    or a pairwise model such as the cross-encoder): ``text`` from their fields and ``rerank_text``, the
    string Elasticsearch sends to ``/v1/rerank`` in mode native. Scripts only: no inference endpoint, no
    sidecar call at index time, any licence."""
    return {
        "description": "esrerank: text and rerank_text of a question (the model has no vectors to store)",
        "processors": text_processors(title_field, body_field, True),
    }


def rerank_text_as_painless(doc: dict[str, Any], title_field: str = "title", body_field: str = "body") -> str:
    """:data:`RERANK_TEXT_SCRIPT` restated in Python, line for line, for the tests that hold it equal to
    ``rerank_text`` (the Painless itself runs only in a cluster)."""
    t, b = value_at(doc, title_field), value_at(doc, body_field)
    title = "" if t is None else str(t)
    body = "" if b is None else str(b)
    title = title.replace("<", "&lt;").replace("${", "&#36;{")
    body = body.replace("${", "&#36;{")
    i = 0
    while i < len(body) and body[i] <= " ":
        i += 1
    if not body:
        return title
    if i < len(body) and body[i] == "<":
        return title + body
    return f"{title}<p>{body}</p>"
