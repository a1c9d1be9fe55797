"""The hyper-parameters every type built over the vocabulary shares, validated by pydantic.

Each type's own class, with its paper's defaults, lives in its module of ``models.types`` beside its
registry entry; this base stays here because the papers' types of several modules extend it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class VocabularyHyper(BaseModel):
    """Frozen and strict (an unknown name is an error), as a checkpoint's ``config.json`` is read back."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    freeze_embeddings: bool = False
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    text_combine: Literal["concat", "average"] = "concat"
    similarity: Literal["cosine", "manhattan"] = "cosine"


__all__ = ["VocabularyHyper"]
