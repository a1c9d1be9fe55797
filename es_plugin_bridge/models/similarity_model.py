"""QuestionSimilarityModel: encodes two questions (title + body) and scores their similarity.

``encode`` turns padded token ids into representations (``"neural"`` [B, D]; for bow-cnn also the
sparse weighted bag of words ``"bow"`` values [B, T] with their word ids ``"bow_ids"`` [B, T]),
``component_scores`` compares two encodings path by path, and ``score`` combines them
(bow-cnn: s = β₁·cos_bow + β₂·cos_cnn with learned β; others: the neural similarity). Encoding
once and scoring many pairs is what retrieval, reranking and the sidecar need.

Title and body: "concat" joins them into one sequence (dos Santos et al.'s "all" setting);
"average" encodes them separately and averages the two vectors (Lei et al.), using the title
alone when a body is empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models import registry
from es_plugin_bridge.models.base import Encoder, make_embedding
from es_plugin_bridge.models.bow import WeightedBagOfWords, bow_cosine
from es_plugin_bridge.models.registry import parse_hyper
from es_plugin_bridge.models.sequences import check_left_aligned, concat_packed, has_tokens, stack_rows
from es_plugin_bridge.models.similarity import SIMILARITY_FUNCTIONS

QUESTION_KEYS = ("title_ids", "title_mask", "body_ids", "body_mask")


def _make_encoder(model_type: str, embedding: nn.Embedding, hyper: Any) -> Encoder:
    """The registry entry's encoder class, built from the hyper-parameters of its argument names."""
    entry = registry.model_type(model_type)
    return registry.encoder_class(entry)(embedding, **registry.encoder_kwargs(entry, hyper))


class QuestionSimilarityModel(nn.Module):
    """One model of the papers; build it with :func:`build_model`."""

    #: Two questions are compared by their vectors (a cross-encoder's are read together instead).
    pairwise = False

    def __init__(
        self,
        model_type: str,
        vocab_size: int,
        embedding_dim: int,
        hyper: Any,
        encoder: Encoder,
        bow: WeightedBagOfWords | None = None,
    ) -> None:
        super().__init__()
        self.model_type = model_type
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.hyper = hyper
        self.similarity = hyper.similarity
        self.text_combine = hyper.text_combine
        self.encoder = encoder
        self.bow = bow
        self.beta = nn.Parameter(torch.tensor(list(hyper.beta_init), dtype=torch.float32)) if bow else None
        self._similarity = SIMILARITY_FUNCTIONS[hyper.similarity]

    @property
    def output_dim(self) -> int:
        return self.encoder.output_dim

    def config(self) -> dict[str, Any]:
        """JSON-ready arguments that rebuild this architecture: ``build_model(**model.config())``."""
        return {
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "embedding_dim": self.embedding_dim,
            **self.hyper.model_dump(mode="json"),
        }

    def encode(
        self,
        title_ids: torch.Tensor,
        title_mask: torch.Tensor,
        body_ids: torch.Tensor,
        body_mask: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Padded title and body ([B, Tt], [B, Tb], left-aligned bool masks) → representations."""
        if not (torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()):
            check_left_aligned(title_mask, "title_mask")
            check_left_aligned(body_mask, "body_mask")
        if self.text_combine == "concat":
            ids, mask = concat_packed(title_ids, title_mask, body_ids, body_mask)
            neural = self.encoder(ids, mask)
        else:
            neural = self._encode_average(title_ids, title_mask, body_ids, body_mask)
        out = {"neural": neural}
        if self.bow is not None:
            ids = torch.cat([title_ids, body_ids], dim=1)
            bow_ids, bow_values = self.bow(ids, torch.cat([title_mask, body_mask], dim=1))
            out["bow"] = bow_values
            out["bow_ids"] = bow_ids
        return out

    def _encode_average(
        self,
        title_ids: torch.Tensor,
        title_mask: torch.Tensor,
        body_ids: torch.Tensor,
        body_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Title and body through the encoder in one batch, then the mean of the non-empty parts."""
        ids, mask = stack_rows(title_ids, title_mask, body_ids, body_mask)
        vectors = self.encoder(ids, mask).reshape(2, title_ids.shape[0], -1)
        has_title, has_body = has_tokens(title_mask), has_tokens(body_mask)
        total = (vectors[0] * has_title + vectors[1] * has_body) / (has_title + has_body).clamp_min(1.0)
        return total

    def component_scores(
        self, a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Similarity of each path, [B] each: ``"neural"`` and, for bow-cnn, ``"bow"``."""
        scores = {"neural": self._similarity(a["neural"], b["neural"])}
        if self.bow is not None:
            scores["bow"] = bow_cosine(a["bow_ids"], a["bow"], b["bow_ids"], b["bow"])
        return scores

    def score(self, a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Combined similarity [B]: β₁·bow + β₂·neural for bow-cnn, else the neural similarity."""
        scores = self.component_scores(a, b)
        if self.beta is None:
            return scores["neural"]
        return self.beta[0] * scores["bow"] + self.beta[1] * scores["neural"]

    def score_candidates(
        self, a: Mapping[str, torch.Tensor], candidates: Mapping[str, torch.Tensor]
    ) -> torch.Tensor:
        """Scores of B queries against B·K candidates (query i's K candidates contiguous) → [B, K]."""
        batch = next(iter(a.values())).shape[0]
        count = next(iter(candidates.values())).shape[0]
        if batch == 0 or count % batch:
            raise ValueError(f"{count} candidates cannot be split evenly over {batch} queries")
        k = count // batch
        repeated = {key: value.repeat_interleave(k, dim=0) for key, value in a.items()}
        return self.score(repeated, candidates).reshape(batch, k)

    def forward(self, q: Mapping[str, torch.Tensor], d: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Score [B] of question pairs, each side a dict with title_ids, title_mask, body_ids, body_mask."""
        encoded_q = self.encode(*(q[key] for key in QUESTION_KEYS))
        return self.score(encoded_q, self.encode(*(d[key] for key in QUESTION_KEYS)))

    def load_encoder_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Load pre-trained encoder weights (``TitleDecoder.encoder_state()``); UserError on a mismatch."""
        own = self.encoder.state_dict()
        missing = sorted(set(own) - set(state))
        unexpected = sorted(set(state) - set(own))
        if missing or unexpected:
            raise UserError(
                f"pre-trained encoder does not fit this {self.model_type} model: "
                f"missing {missing[:5]}, unexpected {unexpected[:5]}"
            )
        for key, value in state.items():
            if tuple(value.shape) != tuple(own[key].shape):
                raise UserError(
                    f"pre-trained encoder weight {key!r} has shape {tuple(value.shape)}, "
                    f"this model needs {tuple(own[key].shape)}"
                )
        self.encoder.load_state_dict(dict(state))


def build_model(
    model_type: str,
    vocab_size: int,
    *,
    embedding_dim: int = 200,
    embeddings: np.ndarray | None = None,
    idf: np.ndarray | None = None,
    **hyper: Any,
) -> QuestionSimilarityModel:
    """Build a model; ``embeddings`` [V, embedding_dim] and ``idf`` [V] only initialise weights.

    Without them (e.g. rebuilding from ``config()`` before ``load_state_dict``) word vectors start
    random and the BOW weights t at ones. Unknown type or bad hyper-parameter → UserError.
    """
    entry = registry.model_type(model_type)
    if entry.family != "vocabulary":
        raise UserError(f"model type {model_type!r} is not built over the vocabulary: use "
                        f"es_plugin_bridge.models.transformer for it")
    parsed = parse_hyper(model_type, hyper)
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 1:
        raise UserError(f"vocab_size must be a positive integer, got {vocab_size!r}")
    if not isinstance(embedding_dim, int) or isinstance(embedding_dim, bool) or embedding_dim < 1:
        raise UserError(f"embedding_dim must be a positive integer, got {embedding_dim!r}")
    if embeddings is not None and tuple(np.shape(embeddings)) != (vocab_size, embedding_dim):
        raise UserError(
            f"embeddings have shape {tuple(np.shape(embeddings))}, expected ({vocab_size}, {embedding_dim}) "
            "(vocab_size, embedding_dim)"
        )
    if idf is not None and tuple(np.shape(idf)) != (vocab_size,):
        raise UserError(f"idf has shape {tuple(np.shape(idf))}, expected ({vocab_size},)")
    embedding = make_embedding(vocab_size, embedding_dim, embeddings, freeze=parsed.freeze_embeddings)
    encoder = _make_encoder(model_type, embedding, parsed)
    bow = None
    if entry.learned_bow:
        bow = WeightedBagOfWords(vocab_size, init=parsed.bow_init, idf=idf, trainable=parsed.bow_trainable)
    return QuestionSimilarityModel(model_type, vocab_size, embedding_dim, parsed, encoder, bow)
