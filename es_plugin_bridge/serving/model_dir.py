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
from collections.abc import Callable, Iterator, Sequence
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
from es_plugin_bridge.serving.encode_schedule import (
    ALONE_FROM,
    BATCHED,
    LENGTH_BUCKETS,
    PER_TEXT,
    SCHEDULES,
    Run,
    Schedule,
    dependence,
    plan,
)
from es_plugin_bridge.serving.inputs import Encoded, EncoderInputs, PairInputs, input_adapter
from es_plugin_bridge.text import Preprocessor, TextOptions

CONFIG = "config.json"
VOCAB = "vocab.json"
ENCODER = "encoder.onnx"
BOW_WEIGHTS = "bow_weights.npy"
FILES = (CONFIG, VOCAB, ENCODER, BOW_WEIGHTS)

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


#: Real questions (shell, code, markup) the loaded graph's schedule is checked on.
PROBES = (
    Question("probe-deb", "How do I install a .deb file from the command line?",
             "<p>I tried <code>sudo dpkg -i foo.deb</code> but apt-get complains about dependencies.</p>"),
    Question("probe-grub", "grub rescue prompt after upgrading to 24.04", ""),
    Question("probe-ls", "Why does ls -la | grep ^d list nothing in my home folder?",
             "<pre>$ ls -la | grep ^d\n$</pre>"),
)


def _length(shape: tuple[tuple[int, ...], ...]) -> int:
    """A row's length in a feed shape: its longest input axis (the sub-words of a transformer)."""
    return max((d for dims in shape for d in dims), default=0)


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
        #: How texts share runs (``serving.encode_schedule``): the export's measured record, checked again
        #: on this machine by :meth:`load` (a directory exported before the record is measured there).
        recorded = config.verification.encode if config.verification is not None else None
        self.schedule: Schedule = recorded or PER_TEXT  # re-checked on this machine by ``load``
        self.alone_from = (config.verification.alone_from if config.verification is not None else None) \
            or ALONE_FROM

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
        loaded.schedule = loaded._checked_schedule()
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

    def _checked_schedule(self) -> Schedule:
        """The first schedule, from the recorded one on (``SCHEDULES`` order), that keeps this machine's
        outputs independent of their run on a few real questions (onnxruntime's kernels differ between
        CPUs, so the export's measurement is re-checked where the graph serves); ``per-text`` always holds.
        A directory with no record starts from ``batched``."""
        recorded = self.config.verification.encode if self.config.verification is not None else None
        for schedule in SCHEDULES[SCHEDULES.index(recorded or BATCHED):]:
            if schedule == PER_TEXT or self.schedule_dependence(schedule, PROBES) == 0.0:
                if recorded is not None and schedule != recorded:
                    log.warning("%s: its outputs depend on their batch-mates on this machine under the "
                                "recorded %r schedule; serving it %r", self.path, recorded, schedule)
                return schedule
        raise AssertionError("per-text always holds")  # pragma: no cover

    def schedule_dependence(self, schedule: Schedule, questions: Sequence[Question]) -> float:
        """``encode_schedule.dependence`` of ``questions`` (a pairwise graph: each paired with another)
        under ``schedule``: 0.0 when it gives each the same output whatever shares its run."""
        encoded = self.inputs.encode(list(questions))
        if self.pairwise:
            sides = [self._pair_inputs.side(e) for e in encoded]
            items: list = [(sides[i], sides[-1 - i]) for i in range(len(sides))]
            feed: Callable = self._pair_inputs.pair_feed
        else:
            items, feed = list(encoded), self.inputs.feed

        def run(rows: list) -> np.ndarray:
            return self.session.run([self.config.output], feed(rows))[0]

        def length(item: Any) -> int:
            return _length(self._shape(feed([item])))

        return dependence(run, items, schedule, length, self.alone_from)

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
        """Neural vectors [N, D] float32 of already encoded questions (``token_ids``), in the runs of
        :meth:`runs`."""
        if self.pairwise:
            raise UserError(f"{self.path}: a {self.model_type} model reads a query and a document together: "
                            "it has no vector per text (it reranks: /v1/rerank)")
        out = np.zeros((len(encoded), self.dimension), dtype=np.float32)
        for run in self.runs(encoded):
            out[run.rows] = self.run_feed([encoded[i] for i in run.feed])[: len(run.rows)]
        return out

    def runs(self, encoded: Sequence[Encoded]) -> list[Run]:
        """The encoder runs that encode ``encoded`` under :attr:`schedule` (``serving.encode_schedule``).

        ``batched``: up to ``batch_size`` rows a run, in order; beyond it, a graph with dynamic lengths
        gets the rows sorted by length before they are cut, so each run pads to its own longest row
        (101 AskUbuntu titles cost about a third of one run padded to the longest of all).
        ``length-buckets``: runs of rows whose feed has the same shape, never of one row alone.
        """
        if self.schedule == LENGTH_BUCKETS:
            shapes: list = [self._shape(self.inputs.feed([e])) for e in encoded]
            lengths = [_length(shape) for shape in shapes]
        else:
            shapes = [None] * len(encoded)
            lengths = [sum(len(part) for part in e) for e in encoded]
        return plan(shapes, lengths, self.schedule, self.batch_size, self.config.dynamic_length,
                    self.alone_from)

    @staticmethod
    def _shape(feed: dict[str, np.ndarray]) -> tuple[tuple[int, ...], ...]:
        """A row's feed shape alone (without the batch axis): equal shapes pad nothing together."""
        return tuple(tuple(array.shape[1:]) for array in feed.values())

    def run_feed(self, encoded: Sequence[Encoded]) -> np.ndarray:
        """One onnxruntime run on ``encoded`` as one batch: its output rows, in order."""
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
        """The pair graph's output [N, 1] float32 for (query side, document side) pairs, in the runs of
        :attr:`schedule` (a pair's shape: its feed alone)."""
        feed = self._pair_inputs.pair_feed
        if self.schedule == LENGTH_BUCKETS:
            shapes: list = [self._shape(feed([pair])) for pair in pairs]
            lengths = [_length(shape) for shape in shapes]
        else:
            shapes, lengths = [None] * len(pairs), [len(q) + len(d) for q, d in pairs]
        out = np.zeros((len(pairs), self.dimension), dtype=np.float32)
        for run in plan(shapes, lengths, self.schedule, self.batch_size, False, self.alone_from):
            got = self.session.run([self.config.output], feed([pairs[i] for i in run.feed]))[0]
            out[run.rows] = got[: len(run.rows)]
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


__all__ = ["BOW_WEIGHTS", "CONFIG", "ENCODER", "FILES", "MANIFEST", "VOCAB", "BagOfWords",
           "ModelDirectory"]
