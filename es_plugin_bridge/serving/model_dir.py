"""Load a verified exported model directory and score questions with onnxruntime (no torch).

This is the sidecar's core. Scores reproduce ``training.scorer.NeuralScorer`` exactly:

- ``neural``: cosine (or exp(−L1) for the Manhattan models) of the encoder's vectors;
- ``bow``: cosine of L2-normalised weighted bags of words (tf · learned t for bow-cnn, tf · IDF
  otherwise), over the same capped title + body ids the encoder sees;
- ``model``: bow-cnn's β₁·bow + β₂·neural, else ``neural``;
- ``fused`` (when first-stage scores are given): β_fs·minmax(first stage) + β_bow·bow + β_neural·neural
  with the β fitted for that first stage at training time.

Loading parses only JSON, a ``.npy`` array (``allow_pickle=False``) and an ONNX graph, from the
bytes whose sha256 the manifest vouches for; nothing in the directory can run code.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from es_plugin_bridge.core.fusion import fuse
from es_plugin_bridge.core.manifest import MANIFEST, read_verified
from es_plugin_bridge.core.model_config import ExportedConfig, parse_config
from es_plugin_bridge.core.vocab import PAD_ID, UNK_ID, Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import DataFormatError, UserError
from es_plugin_bridge.serving.device import Device, check_active, requested_providers
from es_plugin_bridge.text import Preprocessor, TextOptions

CONFIG = "config.json"
VOCAB = "vocab.json"
ENCODER = "encoder.onnx"
BOW_WEIGHTS = "bow_weights.npy"
FILES = (CONFIG, VOCAB, ENCODER, BOW_WEIGHTS)
COMPONENTS = ("neural", "bow", "model")

log = logging.getLogger("esrerank.sidecar")

BagOfWords = tuple[np.ndarray, np.ndarray]  # (vocabulary ids int64, L2-normalised weights float64)


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from _tensors(sub)


def _session(data: bytes, source: str, threads: int | None, device: Device = "cpu") -> ort.InferenceSession:
    """An onnxruntime session on the graph's bytes, on ``device`` (``serving.device``); refuses graphs
    that read external files."""
    try:
        graph = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf raises its own DecodeError type
        raise UserError(f"{source}: not a valid ONNX graph ({exc})") from None
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in _tensors(graph.graph)):
        raise UserError(f"{source}: the graph references external data files; refusing it")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    providers = requested_providers(device, ort.get_available_providers())
    try:
        session = ort.InferenceSession(data, options, providers=providers)
    except Exception as exc:  # onnxruntime's own exception types
        raise UserError(f"{source}: onnxruntime cannot load the graph ({exc})") from None
    _, fallback = check_active(device, providers, session.get_providers())
    if fallback:
        log.warning("%s", fallback)
    return session


def _json(data: bytes, source: str) -> Any:
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataFormatError(source, "json", str(exc)) from None


def _bow_weights(data: bytes, source: str, size: int) -> np.ndarray:
    try:
        weights = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise UserError(f"{source}: not a plain .npy array ({exc})") from None
    if weights.dtype != np.float32 or weights.shape != (size,):
        raise UserError(f"{source}: expected float32 [{size}], got {weights.dtype} {list(weights.shape)}")
    if not np.isfinite(weights).all():
        raise UserError(f"{source}: weights must be finite")
    return weights


class ModelDirectory:
    """An exported model: text pipeline, vocabulary, ONNX encoder, BOW weights and β."""

    def __init__(
        self,
        path: Path,
        config: ExportedConfig,
        vocab: Vocabulary,
        bow_weights: np.ndarray,
        session: ort.InferenceSession,
        batch_size: int = 64,
    ) -> None:
        self.path = path
        self.config = config
        self.vocab = vocab
        self.bow_weights = bow_weights
        self.session = session
        self.batch_size = batch_size
        self.preprocessor = Preprocessor(TextOptions.from_mapping(config.text, source=str(path / CONFIG)))

    @classmethod
    def load(cls, path: str | Path, *, threads: int | None = None, batch_size: int = 64,
             expect_sha256: str | None = None, device: Device = "cpu") -> ModelDirectory:
        """Verify manifest.json against every file, then load; UserError naming the bad file.

        ``expect_sha256`` pins the manifest itself (see ``core.manifest``): a directory rewritten by
        someone else, manifest included, is refused.
        """
        path = Path(path)
        files = read_verified(path, required=FILES, expect_sha256=expect_sha256)
        config = parse_config(_json(files[CONFIG], str(path / CONFIG)), str(path / CONFIG))
        vocab = Vocabulary.from_dict(_json(files[VOCAB], str(path / VOCAB)), str(path / VOCAB))
        if len(vocab) != config.vocab_size:
            raise UserError(f"{path / VOCAB}: {len(vocab)} tokens, {CONFIG} says {config.vocab_size}")
        weights = _bow_weights(files[BOW_WEIGHTS], str(path / BOW_WEIGHTS), config.vocab_size)
        session = _session(files[ENCODER], str(path / ENCODER), threads, device)
        names = sorted(i.name for i in session.get_inputs())
        if names != sorted(config.inputs) or [o.name for o in session.get_outputs()] != [config.output]:
            raise UserError(f"{path / ENCODER}: inputs/outputs differ from those in {CONFIG}")
        loaded = cls(path, config, vocab, weights, session, batch_size)
        if config.tokenizer is not None:  # a transformer: sub-word inputs from tokenizer.json
            from es_plugin_bridge.serving.transformer_dir import with_tokenizer

            loaded = with_tokenizer(loaded, files)
        try:  # one real run, so a graph that cannot serve fails here rather than on the first request
            shape = loaded.vectors([Question("load-check", "load check", "")]).shape
        except ValueError as exc:  # numpy: the graph's output does not fit [1, dimension]
            raise UserError(f"{path / ENCODER}: output does not have {CONFIG}'s dimension ({exc})") from None
        except Exception as exc:  # onnxruntime's own error types
            raise UserError(f"{path / ENCODER}: the graph fails on a test input ({exc})") from None
        assert shape == (1, config.dimension)
        return loaded

    # -- properties -----------------------------------------------------------------------------
    @property
    def model_type(self) -> str:
        return self.config.model_type

    @property
    def similarity(self) -> str:
        return self.config.similarity

    @property
    def dimension(self) -> int:
        return self.config.dimension

    @property
    def provider(self) -> str:
        """The onnxruntime provider that scores (``CPUExecutionProvider``, ``CUDAExecutionProvider``)."""
        return self.session.get_providers()[0]

    @property
    def fusion(self) -> dict[str, dict[str, float]]:
        """Fusion β per first stage (``bm25``, ``lmdirichlet``, ``given``, ...)."""
        return self.config.beta.fusion

    # -- encodings ------------------------------------------------------------------------------
    def token_ids(self, question: Question) -> tuple[list[int], list[int]]:
        """Title and body ids capped at max_title / max_body (as the training Featurizer does)."""
        title = self.vocab.ids(self.preprocessor.title_tokens(question))[: self.config.max_title]
        body = self.vocab.ids(self.preprocessor.body_tokens(question))[: self.config.max_body]
        return title, body

    def _feed(self, encoded: Sequence[tuple[list[int], list[int]]]) -> dict[str, np.ndarray]:
        feed: dict[str, np.ndarray] = {}
        for part, cap in ((0, self.config.max_title), (1, self.config.max_body)):
            rows = [e[part] for e in encoded]
            width = max(1, max(len(r) for r in rows)) if self.config.dynamic_length else cap
            ids = np.full((len(rows), width), PAD_ID, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=bool)
            for i, row in enumerate(rows):
                ids[i, : len(row)] = row
                mask[i, : len(row)] = True
            name = self.config.inputs[2 * part]
            feed[name], feed[self.config.inputs[2 * part + 1]] = ids, mask
        return feed

    def vectors(self, questions: Sequence[Question]) -> np.ndarray:
        """Neural vectors [N, D] float32, run in batches of ``batch_size``."""
        return self.vectors_from_ids([self.token_ids(q) for q in questions])

    def vectors_from_ids(self, encoded: Sequence[tuple[list[int], list[int]]]) -> np.ndarray:
        """Neural vectors [N, D] float32 of already tokenised questions (``token_ids``), in batches."""
        out = np.zeros((len(encoded), self.dimension), dtype=np.float32)
        for start in range(0, len(encoded), self.batch_size):
            chunk = encoded[start : start + self.batch_size]
            out[start : start + len(chunk)] = self.session.run([self.config.output], self._feed(chunk))[0]
        return out

    def bag_of_words(self, question: Question) -> BagOfWords:
        """Sorted vocabulary ids and their L2-normalised weights tf·t."""
        return self.bag_from_ids(*self.token_ids(question))

    def bag_from_ids(self, title: list[int], body: list[int]) -> BagOfWords:
        """:meth:`bag_of_words` of an already tokenised question."""
        ids, counts = np.unique(np.asarray(title + body, dtype=np.int64), return_counts=True)
        keep = (ids != PAD_ID) & (ids != UNK_ID)  # unknown words are no shared word
        ids, counts = ids[keep], counts[keep]
        values = counts * self.bow_weights[ids].astype(np.float64)
        norm = np.sqrt((values * values).sum())
        return ids, (values / norm if norm > 0 else values)

    def bags_from_ids(self, encoded: Sequence[tuple[list[int], list[int]]]) -> list[BagOfWords]:
        """:meth:`bag_from_ids` of many questions in one vectorised pass (bit-identical to it)."""
        if not encoded:
            return []
        rows = [title + body for title, body in encoded]
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        flat = np.fromiter((i for row in rows for i in row), dtype=np.int64, count=int(lengths.sum()))
        owner = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
        size = np.int64(self.config.vocab_size)
        pairs, counts = np.unique(owner * size + flat, return_counts=True)  # sorted by (owner, id)
        docs, ids = np.divmod(pairs, size)
        keep = (ids != PAD_ID) & (ids != UNK_ID)
        docs, ids, counts = docs[keep], ids[keep], counts[keep]
        values = counts * self.bow_weights[ids].astype(np.float64)
        bounds = np.searchsorted(docs, np.arange(len(rows) + 1))
        bags = []
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            v = values[start:end]
            norm = np.sqrt((v * v).sum())
            bags.append((ids[start:end].copy(), v / norm if norm > 0 else v.copy()))
        return bags

    def encode(self, questions: Sequence[Question]) -> dict[str, Any]:
        """``neural`` [N, D] float32 and ``bow``: one (ids, weights) pair per question."""
        return {"neural": self.vectors(questions), "bow": [self.bag_of_words(q) for q in questions]}

    def terms(self, ids: np.ndarray) -> list[str]:
        """The tokens of vocabulary ids (e.g. the keys of a ``rank_features`` field)."""
        return [self.vocab.tokens[int(i)] for i in ids]

    # -- scores ---------------------------------------------------------------------------------
    def neural_similarity(self, query: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """Similarity of one query vector [D] to document vectors [N, D] → [N] float64."""
        q = query.astype(np.float64)
        d = docs.astype(np.float64)
        if self.similarity == "manhattan":  # floored as in models.similarity: stays in (0, 1]
            return np.maximum(np.exp(-np.abs(d - q).sum(1)), float(np.finfo(np.float32).tiny))
        qn = q / max(float(np.linalg.norm(q)), 1e-8)
        dn = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-8)
        return dn @ qn

    @staticmethod
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

    def model_score(self, neural: np.ndarray, bow: np.ndarray) -> np.ndarray:
        beta = self.config.beta.model
        return neural if beta is None else beta[0] * bow + beta[1] * neural

    def fusion_stage(self, first_stage: str | None = None) -> str:
        """The first stage whose β to use: the one asked for, else the training default."""
        stages = self.fusion
        if not stages:
            raise UserError(f"{self.path / CONFIG}: the model has no fusion weights (β)")
        name = first_stage or self.config.beta.fusion_default or next(iter(stages))
        if name not in stages:
            raise UserError(f"no fusion weights for first stage {name!r}; the model has {sorted(stages)}")
        return name

    def rerank(
        self,
        query: Question,
        docs: Sequence[Question],
        first_stage_scores: Sequence[float] | None = None,
        first_stage: str | None = None,
    ) -> dict[str, np.ndarray]:
        """Scores of ``docs`` for ``query``: ``neural``, ``bow``, ``model`` and, given first-stage
        scores (one per doc, higher is better), ``fused`` with that first stage's β."""
        if first_stage_scores is not None:
            if len(first_stage_scores) != len(docs):
                raise UserError(f"{len(first_stage_scores)} first-stage scores for {len(docs)} documents")
            if not np.isfinite(np.asarray(first_stage_scores, dtype=np.float64)).all():
                raise UserError("first-stage scores must be finite numbers")
        if not docs:
            names = COMPONENTS + (("fused",) if first_stage_scores is not None else ())
            return {name: np.zeros(0) for name in names}
        vectors = self.vectors([query, *docs])
        bags = [self.bag_of_words(q) for q in (query, *docs)]
        return self.scores(vectors[0], bags[0], vectors[1:], bags[1:], first_stage_scores, first_stage)

    def scores(
        self,
        query_vector: np.ndarray,
        query_bag: BagOfWords,
        doc_vectors: np.ndarray,
        doc_bags: Sequence[BagOfWords],
        first_stage_scores: Sequence[float] | None = None,
        first_stage: str | None = None,
    ) -> dict[str, np.ndarray]:
        """:meth:`rerank` from encodings already computed (e.g. cached by the sidecar)."""
        neural = self.neural_similarity(query_vector, doc_vectors)
        bow = self.bow_similarity(query_bag, doc_bags)
        out = {"neural": neural, "bow": bow, "model": self.model_score(neural, bow)}
        if first_stage_scores is not None:
            weights = self.fusion[self.fusion_stage(first_stage)]
            features = {"first_stage": np.asarray(first_stage_scores, dtype=np.float64), "bow": bow,
                        "neural": neural}
            out["fused"] = fuse(features, weights)
        return out


__all__ = ["BOW_WEIGHTS", "CONFIG", "ENCODER", "FILES", "MANIFEST", "VOCAB", "BagOfWords", "ModelDirectory"]
