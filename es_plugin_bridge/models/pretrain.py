"""Encoder-decoder pre-training of Lei et al. (2016), Section 4.2.

A conditional language model P(title | context): the question encoder (RCNN, LSTM or GRU) turns
the context — the question's body, or its title — into a vector; a GRU decoder, started from
that vector and fed it at every step, generates the title word by word. The loss is the token
cross-entropy of the title plus an end-of-title symbol. The decoder shares the encoder's word
embeddings. The pre-trained encoder is then moved into a QuestionSimilarityModel with
``model.load_encoder_state(decoder.encoder_state())`` (or trained in place when built with
``TitleDecoder.for_model(model)``) and fine-tuned on the ranking objective.

The output layer predicts ids ``0 … output_vocab_size − 1`` plus the end symbol; target words
with a larger id are skipped in the loss, so a frequency-sorted vocabulary can keep the softmax
small.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.base import Encoder
from es_plugin_bridge.models.registry import PRETRAINABLE_TYPES
from es_plugin_bridge.models.sequences import embed, lengths, pad_to, stack_rows
from es_plugin_bridge.models.similarity_model import QuestionSimilarityModel

IGNORE = -100


class TitleDecoder(nn.Module):
    """Encoder + GRU decoder that generates a question's title from its body or title."""

    def __init__(
        self,
        encoder: Encoder,
        *,
        output_vocab_size: int | None = None,
        hidden_dim: int | None = None,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        vocab_size = encoder.embedding.num_embeddings
        self.output_vocab_size = vocab_size if output_vocab_size is None else output_vocab_size
        if not 1 <= self.output_vocab_size <= vocab_size:
            raise UserError(f"output_vocab_size must be in 1..{vocab_size}, got {output_vocab_size!r}")
        self.end_id = self.output_vocab_size  # the extra "end of title" class
        self.encoder = encoder
        dim = encoder.embedding.embedding_dim
        hidden = hidden_dim or encoder.output_dim
        self.start = nn.Parameter(torch.zeros(dim))  # input at step 0, instead of a <s> token
        self.init_state = nn.Linear(encoder.output_dim, hidden)
        self.rnn = nn.GRU(dim + encoder.output_dim, hidden, batch_first=True)
        self.output = nn.Linear(hidden, self.output_vocab_size + 1)
        self.dropout = nn.Dropout(dropout)

    @classmethod
    def for_model(cls, model: QuestionSimilarityModel, **kwargs: object) -> TitleDecoder:
        """A decoder sharing ``model``'s encoder, so pre-training updates the model in place."""
        if model.model_type not in PRETRAINABLE_TYPES:
            raise UserError(
                f"pre-training applies to {', '.join(PRETRAINABLE_TYPES)}, not {model.model_type!r}"
            )
        return cls(model.encoder, **kwargs)  # type: ignore[arg-type]

    def logits(
        self,
        context_ids: torch.Tensor,
        context_mask: torch.Tensor,
        title_ids: torch.Tensor,
        title_mask: torch.Tensor,
    ) -> torch.Tensor:
        """[B, Tt + 1, output_vocab_size + 1]: step t predicts title word t (step len: the end symbol)."""
        return self.output(self.dropout(self.states(context_ids, context_mask, title_ids, title_mask)))

    def states(
        self,
        context_ids: torch.Tensor,
        context_mask: torch.Tensor,
        title_ids: torch.Tensor,
        title_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Decoder states [B, Tt + 1, hidden] before the output layer."""
        context = self.encoder(context_ids, context_mask)
        batch = title_ids.shape[0]
        words = embed(self.encoder.embedding, title_ids, title_mask)
        inputs = torch.cat([self.start.expand(batch, 1, -1), words], dim=1)
        inputs = torch.cat([inputs, context.unsqueeze(1).expand(-1, inputs.shape[1], -1)], dim=2)
        start_state = torch.tanh(self.init_state(context)).unsqueeze(0)
        states, _ = self.rnn(self.dropout(inputs), start_state)
        return states

    def _loss(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Cross-entropy over the predicted words only: the output layer (|V|-way, most of the cost)
        runs on the positions that have a target, not on padding — same loss, several times faster."""
        keep = targets != IGNORE
        if not bool(keep.any()):
            return states.sum() * 0.0
        return F.cross_entropy(self.output(self.dropout(states[keep])), targets[keep])

    def targets(self, title_ids: torch.Tensor, title_mask: torch.Tensor) -> torch.Tensor:
        """[B, Tt + 1] class ids: the title's words, then the end symbol, IGNORE elsewhere."""
        words = title_ids.masked_fill(~title_mask | (title_ids >= self.output_vocab_size), IGNORE)
        words = pad_to(words, title_ids.shape[1] + 1, IGNORE)
        return words.scatter(1, lengths(title_mask).unsqueeze(1), self.end_id)

    def forward(
        self,
        context_ids: torch.Tensor,
        context_mask: torch.Tensor,
        title_ids: torch.Tensor,
        title_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Mean token cross-entropy of generating each title from its context (scalar)."""
        states = self.states(context_ids, context_mask, title_ids, title_mask)
        return self._loss(states, self.targets(title_ids, title_mask))

    def question_loss(
        self,
        title_ids: torch.Tensor,
        title_mask: torch.Tensor,
        body_ids: torch.Tensor,
        body_mask: torch.Tensor,
    ) -> torch.Tensor:
        """Loss of the two (title, context) pairs of each question: from its title and from its body.

        Questions with an empty body contribute only the title-from-title term.
        """
        # Only questions that have a body get the "title from body" half (the rest would be all-IGNORE).
        has_body = body_mask.any(1)
        body_ids, body_mask, body_titles, body_title_mask = (
            body_ids[has_body], body_mask[has_body], title_ids[has_body], title_mask[has_body])
        context_ids, context_mask = stack_rows(title_ids, title_mask, body_ids, body_mask)
        titles = torch.cat([title_ids, body_titles], dim=0)
        target_mask = torch.cat([title_mask, body_title_mask], dim=0)
        states = self.states(context_ids, context_mask, titles, target_mask)
        return self._loss(states, self.targets(titles, target_mask))

    def encoder_state(self) -> dict[str, torch.Tensor]:
        """The encoder's weights, for ``QuestionSimilarityModel.load_encoder_state`` or safetensors."""
        return {key: value.detach().clone() for key, value in self.encoder.state_dict().items()}
