"""The vector modes' request bodies in OpenSearch 2.19's terms.

The modes ``vectors``, ``hybrid`` and ``hybrid-rrf`` build Elasticsearch bodies (``elastic/modes/``, from
the clauses of ``elastic/queries.py``). Everything in them but their vector parts reads the same on
OpenSearch (it forked Elasticsearch 7.10): ``match``, ``bool``, ``ids``, ``exists``, ``match_all``,
``rank_feature`` with ``linear`` (mapper-extras' ``RankFeatureQueryBuilder.ScoreFunction.Linear``),
``script_score``, a ``query`` rescore, ``_name`` and ``preference``. :func:`translate` rewrites the vector
parts:

- **Painless.** Elasticsearch's vector functions take the field by name
  (``cosineSimilarity(params.q, 'vector')``, ``l1norm(params.q, 'vector')``); the k-NN plugin's take
  its doc values (``cosineSimilarity(List, KNNVectorScriptDocValues)`` and ``l1Norm(...)``: k-NN
  2.19.1 ``plugin/script/knn_allowlist.txt``, ``KNNScoringUtil.java``), so the field becomes
  ``doc['vector']``. Both return the plain cosine (k-NN: Lucene's ``VectorUtil.cosine``) and L1
  distance, so every score is the Elasticsearch script's. ``doc['vector'].size()`` is 0 for a document
  without a vector (``KNNVectorScriptDocValues.size``), as on Elasticsearch, and the guard matters
  there too: its ``getValue`` throws for such a document.
- **Approximate neighbours.** Elasticsearch's top-level ``knn`` section becomes the k-NN plugin's
  ``knn`` query, ``{"knn": {"vector": {"vector": [...], "k": ..., "filter": ...}}}``
  (``KNNQueryBuilder``). Its ``k`` is Elasticsearch's ``num_candidates``, the size of Lucene's HNSW
  search (the lucene engine's ``method_parameters.ef_search`` only raises ``k`` to itself:
  ``KNNQueryFactory``, ``luceneK = max(k, ef_search)``); the body's ``size`` stays the window, so the
  answer is the same top window of the same candidates. Scores are Lucene's cosine score (1 + cos)/2
  on both engines.
- **Retrievers** (``linear``, ``rescorer``, ``rrf``) do not exist in OpenSearch 2.19; the modes never
  send one there (OpenSearch's licence is not enterprise), and :func:`translate` refuses one.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from es_plugin_bridge.elastic.cluster.dialect import is_opensearch

Body = dict[str, Any]

#: Elasticsearch's vector functions (the field by name) → the k-NN plugin's (the field's doc values).
PAINLESS_FUNCTIONS = {"cosineSimilarity": "cosineSimilarity", "l1norm": "l1Norm"}
#: A call of one of :data:`PAINLESS_FUNCTIONS` on the query vector and a field named in quotes.
_BY_NAME = re.compile(r"\b(" + "|".join(PAINLESS_FUNCTIONS) + r")\(params\.q, '([^']+)'\)")
#: Elasticsearch's vector functions: one left after :data:`PAINLESS_FUNCTIONS` would fail on OpenSearch.
_ES_VECTOR_FUNCTIONS = ("cosineSimilarity(", "l1norm(", "l2norm(", "dotProduct(", "hamming(")


def painless(source: str) -> str:
    """An Elasticsearch script of the modes in the k-NN plugin's Painless: ``f(params.q, 'field')`` →
    ``F(params.q, doc['field'])``."""
    source = _BY_NAME.sub(lambda m: f"{PAINLESS_FUNCTIONS[m[1]]}(params.q, doc['{m[2]}'])", source)
    leftover = [f for f in _ES_VECTOR_FUNCTIONS if f"{f}params.q, '" in source]
    if leftover:
        raise ValueError(f"no OpenSearch twin for {leftover[0]}…) in the script {source!r}")
    return source


def _scripts(node: Any) -> Any:
    """``node`` with the source of every ``script`` (a ``script_score``'s) in the k-NN plugin's Painless."""
    if isinstance(node, list):
        return [_scripts(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out = {}
    for key, value in node.items():
        if key == "script" and isinstance(value, Mapping) and isinstance(value.get("source"), str):
            out[key] = {**value, "source": painless(value["source"])}
        else:
            out[key] = _scripts(value)
    return out


def knn_query(section: Mapping[str, Any]) -> Body:
    """Elasticsearch's ``knn`` section (``KnnSearch``) as the k-NN plugin's ``knn`` query."""
    if "query_vector" not in section:
        raise ValueError("OpenSearch's knn query takes the query vector itself (no query_vector_builder)")
    inner: Body = {"vector": [float(x) for x in section["query_vector"]],
                   "k": int(section.get("num_candidates", section["k"]))}
    if "filter" in section:
        inner["filter"] = copy.deepcopy(section["filter"])
    return {"knn": {section["field"]: inner}}


def translate(body: Mapping[str, Any]) -> Body:
    """A search body of the modes as OpenSearch 2.19 with the k-NN plugin reads it (module doc)."""
    if "retriever" in body:
        raise ValueError("OpenSearch has no retrievers; the modes use their two-call paths there")
    out = _scripts(dict(body))
    if "knn" in out:
        if "query" in out:
            raise ValueError("a body with both knn and query has no one-query twin on OpenSearch")
        out["query"] = knn_query(out.pop("knn"))
    return out


def request_body(client: Any, body: Mapping[str, Any]) -> Body:
    """``body`` as the engine behind ``client`` reads it: Elasticsearch's unchanged (a copy), OpenSearch's
    through :func:`translate`; the one place a mode's body meets the engine's dialect."""
    return translate(body) if is_opensearch(client) else dict(body)
