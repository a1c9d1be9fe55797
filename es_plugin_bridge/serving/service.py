"""What the sidecar computes, apart from HTTP: rerank and embed requests against a model directory.

Kept out of the Flask app so the bridge (and tests) can call it in process with the same results.
A pairwise model (a cross-encoder) reranks like any other, its ``neural`` score run on each (query,
document) pair, but has no vector to embed: ``/v1/encode`` and ``/v1/embed`` are refused, naming why.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from es_plugin_bridge.core.calibration import apply_platt
from es_plugin_bridge.core.features import bow_features
from es_plugin_bridge.core.fusion import minmax
from es_plugin_bridge.core.manifest import manifest_digest
from es_plugin_bridge.data.questions import split_title_body
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.serving import deadline
from es_plugin_bridge.serving.batching import EncoderPool
from es_plugin_bridge.serving.cache import Encoding, EncodingCache, encoding_key, raw_key
from es_plugin_bridge.serving.inputs import Encoded
from es_plugin_bridge.serving.jsonbody import connector_float
from es_plugin_bridge.serving.model_dir import COMPONENTS, BagOfWords, ModelDirectory
from es_plugin_bridge.serving.relevance import (
    LINEAR_COMPONENTS,
    combination_range,
    component_ranges,
    linear_shift,
    to_unit,
)
from es_plugin_bridge.serving.schemas import (
    DocumentIn,
    Embedding,
    EncodeRequest,
    EncodeResponse,
    RerankParams,
    RerankRequest,
    RerankV2Request,
    to_question,
    unscored_reason,
)
from es_plugin_bridge.serving.text_cut import read_question
from es_plugin_bridge.serving.truncation import cut_reason, keep_end, tokens_read

#: Candidate encodings kept (a vector and a bag of words each: about 2 KB for the demo model).
DEFAULT_CACHE_SIZE = 20_000


class RequestError(UserError):
    """A request that is well-formed JSON but asks for something impossible; names the field.

    ``status`` is the HTTP answer: 400, or 413 for more items than the server takes (the request is
    too large, as a body over the byte cap is: a client splits it rather than fixing a field).
    """

    def __init__(self, field: str, message: str, status: int = 400) -> None:
        self.field = field
        self.status = status
        super().__init__(message)


def _question(item: str | DocumentIn) -> Question:
    """``schemas.to_question`` without the content-hash id nothing here reads (a cost on every request)."""
    if isinstance(item, str):
        title, body = split_title_body(item)
        return Question("", title, body)
    return Question(item.id or "", item.title, item.body)


class Service:
    """Scores requests with one loaded model; ``name`` is what responses report as ``model``.

    ``encoder_workers``: None runs each request's encoder calls in its own thread; N hands them to an
    :class:`~es_plugin_bridge.serving.batching.EncoderPool` of N workers shared by every request (what
    ``esrerank serve`` does: a lone request uses every core, concurrent ones are batched together).
    """

    def __init__(self, model: ModelDirectory, name: str | None = None, max_documents: int = 1000,
                 cache_size: int = DEFAULT_CACHE_SIZE, encoder_workers: int | None = None) -> None:
        self.model = model
        self.name = name or f"{model.model_type}:{model.path.name}"
        self.max_documents = max_documents
        self.cache = EncodingCache(cache_size)
        # A pairwise model has no per-text vectors for the workers to compute: its pairs run when scored.
        pooled = encoder_workers is not None and not model.pairwise
        self.encoder = EncoderPool(model, encoder_workers) if pooled else None
        try:  # the model's identity in cache keys: its manifest pins every file
            self._model_key = bytes.fromhex(manifest_digest(model.path))
        except UserError:  # a directory that went away after loading: this process's own identity
            self._model_key = f"{model.path}:{id(model)}".encode()
        self.ranges = ranges = component_ranges(model.similarity, model.config.bow_weights)
        beta = model.config.beta.model
        own = {"bow": beta[0], "neural": beta[1]} if beta is not None else {"neural": 1.0}
        # Range of each score the sidecar can answer with ("model", or a first stage's fusion).
        self.bounds = {"model": combination_range(own, ranges)}
        self.bounds.update({stage: combination_range(w, ranges) for stage, w in model.fusion.items()})

    def _read(self, item: str | DocumentIn) -> Question:
        """A request's text as a Question cut to what the model reads, before it is preprocessed
        (``serving.text_cut``: the same tokens read, whatever the text's length)."""
        return read_question(self.model.inputs, _question(item))

    def relevance(self, key: str, raw: np.ndarray) -> np.ndarray:
        """P(relevant) by the score's Platt curve, else the score mapped onto [0, 1] by its bounds."""
        platt = self.model.config.beta.calibration.get(key)
        return apply_platt(raw, platt) if platt is not None else to_unit(raw, self.bounds[key])

    def _first_stage(self, req: RerankRequest, params: RerankParams) -> str | None:
        """The first stage asked for, in the body or the URL (which must agree when both say)."""
        if params.first_stage is not None and req.first_stage not in (None, params.first_stage):
            raise RequestError("first_stage", f"the body says {req.first_stage!r}, the URL "
                                              f"{params.first_stage!r}")
        return params.first_stage or req.first_stage

    def _fusion_stage(self, name: str | None) -> str:
        try:
            return self.model.fusion_stage(name)
        except UserError as exc:
            raise RequestError("first_stage", str(exc)) from None

    def _stage(self, req: RerankRequest, first_stage: str | None) -> str | None:
        """The first stage whose β fuse the scores, or None for the model's own score."""
        scores = req.first_stage_scores
        if scores is None:
            if first_stage is not None:
                raise RequestError("first_stage", "first_stage needs first_stage_scores (or score=linear)")
            return None
        if len(scores) != len(req.documents):
            message = f"{len(scores)} scores for {len(req.documents)} documents"
            raise RequestError("first_stage_scores", message)
        return self._fusion_stage(first_stage)

    def _check_size(self, field: str, n: int) -> None:
        if n > self.max_documents:
            raise RequestError(field, f"{n} items; this server takes at most {self.max_documents} a request",
                               status=413)

    def linear_shift(self, first_stage: str | None = None) -> float:
        """The constant ``fused − (β_fs·minmax(first stage) + linear score)`` for ``first_stage``'s β.

        Elasticsearch's ``linear`` retriever (weight β_fs with ``minmax`` on the first stage, weight 1
        with no normaliser on the reranker) scores ``fused + 1 − linear_shift``.
        """
        return linear_shift(self.model.fusion[self._fusion_stage(first_stage)], self.ranges)

    def _linear(self, parts: dict[str, np.ndarray], stage: str) -> np.ndarray:
        weights = self.model.fusion[stage]
        raw = sum(weights[c] * parts[c] for c in LINEAR_COMPONENTS) - linear_shift(weights, self.ranges)
        return np.maximum(raw, 0.0)  # only float rounding can take it below 0

    def linear_scores(self, query: Question | str, documents: Sequence[Question | str],
                      first_stage: str | None = None) -> np.ndarray:
        """Elasticsearch's ``linear`` retriever score of each document, in request order (≥ 0).

        ``Σ β_c·(x_c − low_c)`` over c in {bow, neural} with ``first_stage``'s β (default: the model's)
        and ``low_c`` the component's lower bound, so ``β_fs·minmax(first stage) + score`` is the fused
        score minus :meth:`linear_shift`: the same order as ``fused``.
        """
        stage = self._fusion_stage(first_stage)
        self._check_size("documents", len(documents))
        q = query if isinstance(query, Question) else to_question(query)
        docs = [d if isinstance(d, Question) else to_question(d) for d in documents]
        return self._linear(self._parts(q, docs, None, None)[0], stage)

    def encode(self, questions: Sequence[Question], ids_seen: dict[int, Encoded] | None = None,
               ) -> tuple[np.ndarray, list[BagOfWords], list[bool]]:
        """Vectors [N, D], bags of words and whether each came from the cache (:meth:`encodings`);
        RequestError for a pairwise model, which has no vector per text."""
        self._check_vectors()
        states, bags, cached = self.encodings(questions, ids_seen)
        matrix = (np.stack(states) if states else np.zeros((0, self.model.dimension), dtype=np.float32))
        return matrix, bags, cached

    def _check_vectors(self) -> None:
        """RequestError naming why when the model has no vector per text (a pairwise model)."""
        if self.model.pairwise:
            raise RequestError("model", f"{self.name} is a {self.model.model_type} model: it reads a query "
                                        "and a document together and has no vector per text, so it cannot "
                                        "embed (nor serve Elasticsearch's bridge or hybrid modes); it "
                                        "reranks: /v1/rerank, /v2/rerank (Elasticsearch's native mode)")

    def encodings(self, questions: Sequence[Question], ids_seen: dict[int, Encoded] | None = None,
                  ) -> tuple[list[np.ndarray], list[BagOfWords], list[bool]]:
        """What scoring keeps of each question (its vector, or a pairwise model's side of a pair:
        ``ModelDirectory.states_from_ids``), its bag of words and whether they came from the cache.

        A raw text seen before is found without preprocessing; the others are preprocessed (that makes
        their cache key) and looked up again; the ones still missing, each distinct one once, go to the
        encoder together in one batched call (up to the model's batch size).
        """
        raws = [raw_key(self._model_key, q.title, q.body) for q in questions]
        found: list[Encoding | None] = [None] * len(questions)
        for i, hit in enumerate(self.cache.get_raw(raws)):
            if hit is not None:
                found[i] = hit[1]
        rest = [i for i, entry in enumerate(found) if entry is None]
        if rest:
            deadline.check("before_preprocessing")  # the request's deadline, if served over HTTP
        by_raw: dict[Hashable, Encoded] = {}  # a text sent twice in one request is tokenised once
        for i in rest:
            if raws[i] not in by_raw:
                by_raw[raws[i]] = self.model.token_ids(questions[i])
        ids = {i: by_raw[raws[i]] for i in rest}
        if ids_seen is not None:  # the caller's too (what the model read), so nothing is tokenised twice
            ids_seen.update(ids)
        keys = {i: encoding_key(self._model_key, ids[i]) for i in rest}
        for i, entry in zip(rest, self.cache.get_many([keys[i] for i in rest]), strict=True):
            found[i] = entry
        cached = [entry is not None for entry in found]
        todo = list({keys[i]: i for i in rest if found[i] is None}.values())
        fresh: dict[bytes, Encoding] = {}
        if todo:
            misses = [ids[i] for i in todo]
            deadline.check("before_batch")
            if self.encoder is not None:  # the shared encoder workers, checking it before each batch
                deadline.refuse_if_late(self.encoder.predicted_s(len(misses)))
                states = list(self.encoder.vectors(misses, deadline.checker("before_batch"),
                                                   deadline.late_checker()))
            else:
                states = self.model.states_from_ids(misses)
            bags = self.model.bags_from_ids(misses)
            fresh = {keys[i]: (states[j], bags[j]) for j, i in enumerate(todo)}
        for i in rest:
            if found[i] is None:
                found[i] = fresh[keys[i]]
        self.cache.put_many(list(fresh.items()), [(raws[i], keys[i]) for i in rest])
        self.cache.record(sum(cached), len(cached) - sum(cached))
        entries = [entry for entry in found if entry is not None]
        return [state for state, _ in entries], [bag for _, bag in entries], cached

    def _parts(self, query: Question, docs: Sequence[Question], first_stage_scores: Sequence[float] | None,
               stage: str | None) -> tuple[dict[str, np.ndarray], list[bool]]:
        """Every score of ``docs`` (as ``ModelDirectory.rerank``) and which documents were cached."""
        states, bags, cached = self.encodings([query, *docs])
        parts = self.model.scores(states[0], bags[0], states[1:], bags[1:], first_stage_scores, stage)
        return parts, cached[1:]

    @staticmethod
    def _explain(parts: dict[str, np.ndarray], j: int, cached: list[bool], linear: bool, raw: float,
                 first_stage: Sequence[float] | None,
                 normalised: np.ndarray | None) -> dict[str, float | bool | str]:
        """The ``explain`` of the ``j``-th scored document: its components, unrounded."""
        explain: dict[str, float | bool | str] = {name: float(parts[name][j]) for name in COMPONENTS}
        explain["cached"] = cached[j]
        if linear:
            explain["linear"] = float(raw)
        if first_stage is not None and normalised is not None:
            explain.update(first_stage=float(first_stage[j]), fused=float(parts["fused"][j]),
                           first_stage_normalised=float(normalised[j]))
        return explain

    def rerank_json(self, req: RerankRequest, params: RerankParams | None = None) -> dict[str, Any]:
        """Score every document for the query; results best first, cut to ``top_n``.

        With ``first_stage_scores`` the score is the β fusion learned for ``first_stage`` (default:
        the model's); without, the model's own score. Either becomes P(relevant) by the Platt curve
        fit on dev at training time, or, for a model without one, is mapped onto [0, 1] by its
        bounds; both keep the order. With ``score=linear`` (``params``) the score is
        :meth:`linear_scores` instead, for Elasticsearch's ``linear`` retriever. The answer is the
        response body as plain JSON values (the HTTP path; building 100 pydantic results cost more
        than scoring cached candidates), in the shape of :class:`RerankResponse`.
        """
        params = params or RerankParams()
        self._check_size("documents", len(req.documents))
        first_stage = self._first_stage(req, params)
        scores_in = req.first_stage_scores
        linear = params.score == "linear"
        if linear:
            if scores_in is not None:
                raise RequestError("first_stage_scores", "score=linear takes no first_stage_scores "
                                                         "(Elasticsearch adds β·minmax(first stage) itself)")
            stage: str | None = self._fusion_stage(first_stage)
        else:
            stage = self._stage(req, first_stage)
        # A null, blank or over-long document is not scored: it gets the lowest score (0.0 on either
        # scale) and comes last, and the others are scored as if it were not in the window.
        reasons = [unscored_reason(d, self.model.preprocessor) for d in req.documents]
        scored = [i for i, reason in enumerate(reasons) if reason is None]
        raw = np.full(len(reasons), -np.inf)
        relevance = np.zeros(len(reasons))
        parts: dict[str, np.ndarray] = {}
        cached: list[bool] = []
        fs_scored = [scores_in[i] for i in scored] if scores_in is not None else None
        if scored:
            docs = [self._read(req.documents[i]) for i in scored]  # type: ignore[arg-type]  # not null
            parts, cached = self._parts(self._read(req.query), docs, fs_scored, stage)
            if linear:
                assert stage is not None
                raw[scored] = relevance[scored] = self._linear(parts, stage)
            else:
                raw[scored] = parts["fused"] if stage is not None else parts["model"]
                relevance[scored] = self.relevance(stage or "model", raw[scored])
        # Sorted by the raw score: neither a saturated probability (0 or 1) nor the 12 digits written
        # (connector_float) may reorder documents.
        order = np.argsort(-raw, kind="stable")[: req.top_n]
        normalised = minmax(np.asarray(fs_scored)) if req.explain and fs_scored else None
        at = {i: j for j, i in enumerate(scored)}  # request position -> position among the scored
        results: list[dict[str, Any]] = []
        for i, score in zip(order.tolist(), relevance[order].tolist(), strict=True):
            result: dict[str, Any] = {"index": i, "relevance_score": connector_float(score)}
            if req.return_documents:
                doc = req.documents[i]
                result["document"] = doc.model_dump() if isinstance(doc, DocumentIn) else {"text": doc}
            if req.explain and i in at:
                result["explain"] = self._explain(parts, at[i], cached, linear, raw[i], fs_scored, normalised)
            elif req.explain:
                result["explain"] = {"unscored": reasons[i], "cached": False}
            results.append(result)
        return {"results": results, "model": self.name}

    def rerank_v2_json(self, req: RerankV2Request) -> dict[str, Any]:
        """Cohere's v2 answer (``id``, ``results``, ``meta``): :meth:`rerank_json`'s scores, unchanged."""
        out = self.rerank_json(req.as_v1())
        return {"id": str(uuid.uuid4()), "results": out["results"], "meta": {"api_version": {"version": "2"}}}

    def encode_json(self, req: EncodeRequest) -> EncodeResponse:
        """``/v1/encode``: the neural vector and weighted-BOW terms of each text, for storing in an index;
        RequestError for a pairwise model (:meth:`encode`)."""
        self._check_vectors()
        self._check_size("texts", len(req.texts))
        vectors, bags, _ = self.encode([self._read(t) for t in req.texts])
        embeddings = []
        for vec, (ids, weights) in zip(vectors, bags, strict=True):
            terms = dict(zip(self.model.terms(ids), map(float, weights), strict=True))
            features = bow_features(terms)
            embeddings.append(Embedding(vector=vec.astype(float).tolist(), terms=terms,
                                        bow_tokens=list(features), bow_weights=list(features.values())))
        return EncodeResponse(embeddings=embeddings, model=self.name, dimension=self.model.dimension)

    def cohere_vectors(self, texts: Sequence[str], truncate: str | None,
                       output_dimension: int | None = None) -> tuple[list[list[float]], int]:
        """Cohere's embed: each text's vector, cut as ``truncate`` says (``serving.truncation``: END, the
        default, is :meth:`encode_json`'s cut; START keeps the end; NONE refuses a text the model cuts),
        and the tokens the model read of them all (Cohere's ``billed_units.input_tokens``)."""
        self._check_vectors()
        self._check_size("texts", len(texts))
        if output_dimension not in (None, self.model.dimension):
            raise RequestError("output_dimension", f"this model's vectors have {self.model.dimension} "
                                                   f"dimensions; send {self.model.dimension} or leave it out")
        inputs = self.model.inputs
        questions = [_question(t) for t in texts]
        if truncate == "NONE":
            for i, question in enumerate(questions):
                reason = cut_reason(inputs, question)
                if reason is not None:
                    raise RequestError(f"texts.{i}", f"too long for truncate=NONE: {reason}; send a shorter "
                                                     "text, or truncate=END or START")
        elif truncate == "START":
            questions = [_question(keep_end(t, lambda rest: cut_reason(inputs, _question(rest)) is None))
                         for t in texts]
        questions = [read_question(inputs, q) for q in questions]  # NONE and START read the whole text
        seen: dict[int, Encoded] = {}
        vectors, _, _ = self.encode(questions, seen)
        read = sum(tokens_read(seen[i] if i in seen else self.model.token_ids(q))
                   for i, q in enumerate(questions))
        return vectors.astype(float).tolist(), read
