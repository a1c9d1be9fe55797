"""The scoring maths, once: what the PyTorch scorer, the exported scorer and the sidecar all compute.

Every backend encodes questions its own way (torch, onnxruntime) and hands the vectors and bags of
words to these functions, so a checkpoint evaluated with torch and its export served by the sidecar
score by one formula, in float64:

- ``neural``: cosine of the encoder's vectors, or exp(−L1) for the Manhattan models, floored at
  float32's smallest normal number as in ``models.similarity`` so it stays in (0, 1]; for a
  cross-encoder (``sigmoid``), σ of the logit it gives the (query, candidate) pair read together —
  bounded in [0, 1] like the other components, so fusion's β, the sidecar's [0, 1] mapping and
  Elasticsearch's ``linear`` retriever treat it as any neural score, and monotone, so it ranks as the
  logit does;
- ``bow``: cosine of L2-normalised weighted bags of words (tf · learned t for bow-cnn, tf · IDF
  otherwise) over the capped title + body vocabulary ids the encoder sees; padding and the
  unknown-word id are left out (every out-of-vocabulary word shares that id, so counting it would
  make questions full of different unknown words look alike);
- ``model``: bow-cnn's β₁·bow + β₂·neural, else ``neural``;
- ``fused``: ``core.fusion.fuse`` with the β fitted for one first stage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from es_plugin_bridge.core.fusion import fuse
from es_plugin_bridge.core.vocab import PAD_ID, UNK_ID
from es_plugin_bridge.errors import UserError

COMPONENTS = ("neural", "bow", "model")
#: Floor of the Manhattan similarity (float32's smallest normal number), as in models.similarity.
TINY = float(np.finfo(np.float32).tiny)

BagOfWords = tuple[np.ndarray, np.ndarray]  # (sorted vocabulary ids int64, L2-normalised weights float64)


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm in float64 (zero rows stay zero)."""
    d = np.asarray(vectors, dtype=np.float64)
    return d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-8)


def neural_similarity(query: np.ndarray, docs: np.ndarray, similarity: str,
                      docs_normalised: bool = False) -> np.ndarray:
    """Similarity of one query vector [D] to document vectors [N, D] → [N] float64.

    ``docs_normalised``: ``docs`` already went through :func:`normalise` (cosine only; a collection
    normalised once, not once per query — the same numbers).
    """
    q = np.asarray(query, dtype=np.float64)
    if similarity == "manhattan":
        d = np.asarray(docs, dtype=np.float64)
        return np.maximum(np.exp(-np.abs(d - q).sum(1)), TINY)
    qn = q / max(float(np.linalg.norm(q)), 1e-8)
    # einsum, not ``docs @ qn``: BLAS's matrix-vector product sums a row in an order that depends on how
    # many rows it was given (its kernels block rows), so a document's score moved in the last bits with
    # the size of the request it came in (1e-12 after calibration, tests/elastic/test_esql_rerank.py);
    # einsum runs the same loop for every row. 1.4x gemv's time on 36,000 × 384.
    return np.einsum("ij,j->i", docs if docs_normalised else normalise(docs), qn)


def pair_similarity(logits: np.ndarray) -> np.ndarray:
    """σ of pair logits [N], in float64 and without overflow (``exp(−log(1 + e^−x))``)."""
    x = np.asarray(logits, dtype=np.float64)
    return np.exp(-np.logaddexp(0.0, -x))


def bag_of_words(title: Sequence[int], body: Sequence[int], weights: np.ndarray) -> BagOfWords:
    """Sorted vocabulary ids of a question and their L2-normalised weights tf·t."""
    ids, counts = np.unique(np.asarray([*title, *body], dtype=np.int64), return_counts=True)
    keep = (ids != PAD_ID) & (ids != UNK_ID)
    ids, counts = ids[keep], counts[keep]
    values = counts * weights[ids].astype(np.float64)
    norm = np.sqrt((values * values).sum())
    return ids, (values / norm if norm > 0 else values)


def bags_of_words(encoded: Sequence[Sequence[Sequence[int]]], weights: np.ndarray) -> list[BagOfWords]:
    """:func:`bag_of_words` of many questions (``(title ids, body ids, ...)`` each) in one vectorised
    pass, bit-identical to it."""
    if not encoded:
        return []
    rows = [[*e[0], *e[1]] for e in encoded]
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    flat = np.fromiter((i for row in rows for i in row), dtype=np.int64, count=int(lengths.sum()))
    owner = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
    size = np.int64(len(weights))
    pairs, counts = np.unique(owner * size + flat, return_counts=True)  # sorted by (owner, id)
    docs, ids = np.divmod(pairs, size)
    keep = (ids != PAD_ID) & (ids != UNK_ID)
    docs, ids, counts = docs[keep], ids[keep], counts[keep]
    values = counts * weights[ids].astype(np.float64)
    bounds = np.searchsorted(docs, np.arange(len(rows) + 1))
    bags = []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        v = values[start:end]
        norm = np.sqrt((v * v).sum())
        bags.append((ids[start:end].copy(), v / norm if norm > 0 else v.copy()))
    return bags


def bow_similarity(query: BagOfWords, docs: Sequence[BagOfWords]) -> np.ndarray:
    """Cosine of one normalised bag of words to each of ``docs`` → [N] float64.

    One vectorised pass over all documents' terms (the request path), not a loop per document:
    query ids are sorted (``np.unique``), so ``searchsorted`` finds each document term's match.
    """
    q_ids, q_values = query
    if not docs or len(q_ids) == 0:
        return np.zeros(len(docs))
    ids = np.concatenate([d[0] for d in docs])
    values = np.concatenate([d[1] for d in docs])
    owner = np.repeat(np.arange(len(docs)), [len(d[0]) for d in docs])
    at = np.minimum(np.searchsorted(q_ids, ids), len(q_ids) - 1)
    hit = q_ids[at] == ids
    return np.bincount(owner[hit], weights=(values[hit] * q_values[at[hit]]), minlength=len(docs))


def model_score(neural: np.ndarray, bow: np.ndarray, beta: tuple[float, float] | None) -> np.ndarray:
    """The model's own score: bow-cnn's β₁·bow + β₂·neural, else the neural score."""
    return neural if beta is None else beta[0] * bow + beta[1] * neural


def fusion_stage(fusion: Mapping[str, Mapping[str, float]], default: str | None, asked: str | None,
                 source: str) -> str:
    """The first stage whose β to use: the one asked for, else the training default; UserError when the
    model (``source``) has no β, or none for the stage asked."""
    if not fusion:
        raise UserError(f"{source}: the model has no fusion weights (β)")
    name = asked or default or next(iter(fusion))
    if name not in fusion:
        raise UserError(f"no fusion weights for first stage {name!r}; the model has {sorted(fusion)}")
    return name


def scores(query_vector: np.ndarray, query_bag: BagOfWords, doc_vectors: np.ndarray,
           doc_bags: Sequence[BagOfWords], similarity: str, beta: tuple[float, float] | None,
           first_stage_scores: Sequence[float] | None = None,
           fusion_weights: Mapping[str, float] | None = None) -> dict[str, np.ndarray]:
    """``neural``, ``bow`` and ``model`` of each document for the query and, given first-stage scores
    and that stage's β, ``fused``."""
    neural = neural_similarity(query_vector, doc_vectors, similarity)
    return component_scores(neural, query_bag, doc_bags, beta, first_stage_scores, fusion_weights)


def component_scores(neural: np.ndarray, query_bag: BagOfWords, doc_bags: Sequence[BagOfWords],
                     beta: tuple[float, float] | None, first_stage_scores: Sequence[float] | None = None,
                     fusion_weights: Mapping[str, float] | None = None) -> dict[str, np.ndarray]:
    """:func:`scores` from neural scores already computed (a cross-encoder's :func:`pair_similarity`)."""
    neural = np.asarray(neural, dtype=np.float64)
    bow = bow_similarity(query_bag, doc_bags)
    out = {"neural": neural, "bow": bow, "model": model_score(neural, bow, beta)}
    if first_stage_scores is not None:
        assert fusion_weights is not None
        features = {"first_stage": np.asarray(first_stage_scores, dtype=np.float64), "bow": bow,
                    "neural": neural}
        out["fused"] = fuse(features, fusion_weights)
    return out


__all__ = ["COMPONENTS", "TINY", "BagOfWords", "bag_of_words", "bags_of_words", "bow_similarity",
           "component_scores", "fusion_stage", "model_score", "neural_similarity", "normalise",
           "pair_similarity", "scores"]
