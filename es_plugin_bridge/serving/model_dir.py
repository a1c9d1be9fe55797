"""An exported model directory: verified files → config, vocabulary, weights, session, input adapter.

Loading parses only JSON, a ``.npy`` array (``allow_pickle=False``), an ONNX graph and, for sub-word
families, a ``tokenizer.json``, from the bytes whose sha256 the manifest vouches for; nothing in the
directory can run code, and nothing in it names code: the input adapter is chosen from the graph's
input names (``serving.inputs``). Questions are encoded here (onnxruntime vectors, bags of words);
every score is computed by ``core.scoring``, the same maths the PyTorch scorer uses.

A ``pairwise`` directory (a cross-encoder) has no vector per question: what it keeps of a question (its
*state*) is its side of a pair, and its ``neural`` score runs the graph on each (query, document) pair.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx
import onnxruntime as ort

from es_plugin_bridge.core import scoring
from es_plugin_bridge.core.manifest import MANIFEST, read_verified
from es_plugin_bridge.core.model_config import ExportedConfig, parse_config
from es_plugin_bridge.core.scoring import COMPONENTS, BagOfWords
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import DataFormatError, UserError
from es_plugin_bridge.serving.device import Device, check_active, requested_providers
from es_plugin_bridge.serving.inputs import Encoded, EncoderInputs, PairInputs, input_adapter
from es_plugin_bridge.text import Preprocessor, TextOptions

CONFIG = "config.json"
VOCAB = "vocab.json"
ENCODER = "encoder.onnx"
BOW_WEIGHTS = "bow_weights.npy"
FILES = (CONFIG, VOCAB, ENCODER, BOW_WEIGHTS)
#: ``verification.encode`` of a graph whose rows depend on their batch: one run per text.
PER_TEXT = "per-text"

log = logging.getLogger("esrerank.sidecar")


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
    """An exported model: text pipeline, vocabulary, ONNX encoder and its input adapter, BOW weights, β."""

    def __init__(
        self,
        path: Path,
        config: ExportedConfig,
        vocab: Vocabulary,
        bow_weights: np.ndarray,
        session: ort.InferenceSession,
        inputs: EncoderInputs,
        batch_size: int = 64,
    ) -> None:
        self.path = path
        self.config = config
        self.vocab = vocab
        self.bow_weights = bow_weights
        self.session = session
        self.inputs = inputs
        self.batch_size = batch_size

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
        preprocessor = Preprocessor(TextOptions.from_mapping(config.text, source=str(path / CONFIG)))
        inputs = input_adapter(path, config, vocab, preprocessor, files)
        loaded = cls(path, config, vocab, weights, session, inputs, batch_size)
        check = Question("load-check", "load check", "")
        try:  # one real run, so a graph that cannot serve fails here rather than on the first request
            if loaded.pairwise:
                side = loaded.states_from_ids(loaded.inputs.encode([check]))[0]
                shape = loaded._pair_outputs([(side, side)]).shape
            else:
                shape = loaded.vectors([check]).shape
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
    def preprocessor(self) -> Preprocessor:
        """How the model reads a text (``config.json``'s ``text``): the inputs' own, a pair's sides'."""
        inputs = self.inputs
        return inputs.sides.preprocessor if hasattr(inputs, "sides") else inputs.preprocessor

    @property
    def pairwise(self) -> bool:
        """Whether the graph reads (query, document) pairs (a cross-encoder): no vector per question."""
        return self.inputs.pairwise

    @property
    def provider(self) -> str:
        """The onnxruntime provider that scores (``CPUExecutionProvider``, ``CUDAExecutionProvider``)."""
        return self.session.get_providers()[0]

    @property
    def fusion(self) -> dict[str, dict[str, float]]:
        """Fusion β per first stage (``bm25``, ``lmdirichlet``, ``given``, ...)."""
        return self.config.beta.fusion

    # -- encodings ------------------------------------------------------------------------------
    def token_ids(self, question: Question) -> Encoded:
        """The ids the input adapter encodes ``question`` to: vocabulary title and body ids (capped as
        the training featurizer caps them), then the family's own ids if any."""
        return self.inputs.encode([question])[0]

    def vectors(self, questions: Sequence[Question]) -> np.ndarray:
        """Neural vectors [N, D] float32, run in batches of ``batch_size``."""
        return self.vectors_from_ids(self.inputs.encode(questions))

    def vectors_from_ids(self, encoded: Sequence[Encoded]) -> np.ndarray:
        """Neural vectors [N, D] float32 of already encoded questions (``token_ids``), in the batches
        of :meth:`chunks`."""
        if self.pairwise:
            raise UserError(f"{self.path}: a {self.model_type} model reads a query and a document together: "
                            "it has no vector per text (it reranks: /v1/rerank)")
        out = np.zeros((len(encoded), self.dimension), dtype=np.float32)
        for rows in self.chunks(encoded):
            out[rows] = self.run_chunk([encoded[i] for i in rows])
        return out

    def chunks(self, encoded: Sequence[Encoded]) -> list[list[int]]:
        """The encoder calls that encode ``encoded``: lists of row indices, at most ``batch_size`` each.

        Up to ``batch_size`` rows are one call, in order. Beyond it, a graph with dynamic lengths gets
        the rows sorted by length (all id lists together) before they are cut: each call pads to its own
        longest row, so 101 AskUbuntu titles cost the transformer about a third of the CPU that one call
        padded to the longest of all costs (``benchmarks/serving.py``). A graph with fixed lengths pads
        every row to the caps anyway and keeps request order.
        """
        n, size = len(encoded), self.batch_size
        if n <= size or not self.config.dynamic_length:
            return [list(range(start, min(start + size, n))) for start in range(0, n, size)]
        order = sorted(range(n), key=lambda i: sum(len(part) for part in encoded[i]))
        return [order[start : start + size] for start in range(0, n, size)]

    @property
    def per_text(self) -> bool:
        """Whether every text (pair) is its own onnxruntime run, so that its vector depends on it alone.

        A transformer's rows depend on their batch-mates (fp32: in the last bits; int8: by the dynamic
        quantisation's per-run activation scale); the export measures it and records
        ``verification.encode`` (``exporters.batch_check``). A directory exported before has no record:
        its transformer graphs run per text.
        """
        verification = self.config.verification
        recorded = (verification.model_extra or {}).get("encode") if verification is not None else None
        if recorded is not None:
            return recorded == PER_TEXT
        return self.model_type in ("transformer", "cross-encoder")

    def run_chunk(self, encoded: Sequence[Encoded]) -> np.ndarray:
        """One encoder call: the vectors [len(encoded), D] of one batch (at most ``batch_size`` rows),
        one onnxruntime run per text when :attr:`per_text` (each at its own length: no padding)."""
        if self.per_text and len(encoded) > 1:
            return np.concatenate([self.run_chunk([e]) for e in encoded])
        return self.session.run([self.config.output], self.inputs.feed(encoded))[0]

    @property
    def _pair_inputs(self) -> PairInputs:
        return cast(PairInputs, self.inputs)

    def states_from_ids(self, encoded: Sequence[Encoded]) -> list[np.ndarray]:
        """What scoring keeps of each encoded question: its vector (one graph run for all), or for a
        pairwise model its side of a pair (no graph run: pairs are run when scored)."""
        if self.pairwise:
            return [self._pair_inputs.side(e) for e in encoded]
        return list(self.vectors_from_ids(encoded))

    def _pair_outputs(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """The pair graph's output [N, 1] float32 for (query side, document side) pairs, in batches."""
        out = np.zeros((len(pairs), self.dimension), dtype=np.float32)
        size = 1 if self.per_text else self.batch_size
        for start in range(0, len(pairs), size):
            chunk = pairs[start : start + size]
            out[start : start + len(chunk)] = self.session.run([self.config.output],
                                                               self._pair_inputs.pair_feed(chunk))[0]
        return out

    def pair_logits(self, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """The logit [N] float32 of each (query, document) pair, from their sides (``states_from_ids``)."""
        return self._pair_outputs(pairs)[:, 0]

    def neural_from_states(self, query: np.ndarray, docs: Sequence[np.ndarray]) -> np.ndarray:
        """``neural`` [N] float64 of each document: the similarity of the vectors, or σ(pair logit)."""
        if self.pairwise:
            return scoring.pair_similarity(self.pair_logits([(query, doc) for doc in docs]))
        return scoring.neural_similarity(query, np.asarray(docs), self.similarity)

    def bag_of_words(self, question: Question) -> BagOfWords:
        """Sorted vocabulary ids and their L2-normalised weights tf·t."""
        encoded = self.token_ids(question)
        return self.bag_from_ids(encoded[0], encoded[1])

    def bag_from_ids(self, title: list[int], body: list[int]) -> BagOfWords:
        """:meth:`bag_of_words` of an already tokenised question."""
        return scoring.bag_of_words(title, body, self.bow_weights)

    def bags_from_ids(self, encoded: Sequence[Encoded]) -> list[BagOfWords]:
        """:meth:`bag_from_ids` of many questions in one vectorised pass (bit-identical to it)."""
        return scoring.bags_of_words(encoded, self.bow_weights)

    def encode(self, questions: Sequence[Question]) -> dict[str, Any]:
        """``neural`` [N, D] float32 and ``bow``: one (ids, weights) pair per question."""
        return {"neural": self.vectors(questions), "bow": [self.bag_of_words(q) for q in questions]}

    def terms(self, ids: np.ndarray) -> list[str]:
        """The tokens of vocabulary ids (e.g. the keys of a ``rank_features`` field)."""
        return [self.vocab.tokens[int(i)] for i in ids]

    # -- scores (core.scoring) ----------------------------------------------------------------------
    def fusion_stage(self, first_stage: str | None = None) -> str:
        """The first stage whose β to use: the one asked for, else the training default."""
        return scoring.fusion_stage(self.fusion, self.config.beta.fusion_default, first_stage,
                                    str(self.path / CONFIG))

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
        encoded = self.inputs.encode([query, *docs])
        states, bags = self.states_from_ids(encoded), self.bags_from_ids(encoded)
        return self.scores(states[0], bags[0], states[1:], bags[1:], first_stage_scores, first_stage)

    def scores(
        self,
        query_vector: np.ndarray,
        query_bag: BagOfWords,
        doc_vectors: np.ndarray | Sequence[np.ndarray],
        doc_bags: Sequence[BagOfWords],
        first_stage_scores: Sequence[float] | None = None,
        first_stage: str | None = None,
    ) -> dict[str, np.ndarray]:
        """:meth:`rerank` from encodings already computed (e.g. cached by the sidecar): vectors, or for a
        pairwise model the sides of ``states_from_ids``."""
        weights = None if first_stage_scores is None else self.fusion[self.fusion_stage(first_stage)]
        neural = self.neural_from_states(query_vector, doc_vectors)  # type: ignore[arg-type]
        return scoring.component_scores(neural, query_bag, doc_bags, self.config.beta.model,
                                        first_stage_scores, weights)


__all__ = ["BOW_WEIGHTS", "CONFIG", "ENCODER", "FILES", "MANIFEST", "PER_TEXT", "VOCAB", "BagOfWords",
           "ModelDirectory"]
