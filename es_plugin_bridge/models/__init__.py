"""The neural question-similarity models behind one encoder interface.

``build_model`` makes a :class:`QuestionSimilarityModel` for any of the papers' :data:`PAPER_TYPES`;
``TitleDecoder`` pre-trains the RCNN / LSTM / GRU encoders (Lei et al., Section 4.2); every type,
the transformer included, is one entry of ``models.registry``. Attributes load lazily, so importing
the torch-free registry (``esrerank --help``) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "ALL_TYPES": "registry",
    "PAPER_TYPES": "registry",
    "PRETRAINABLE_TYPES": "registry",
    "REGISTRY": "registry",
    "Encoder": "base",
    "hyper_defaults": "registry",
    "TitleDecoder": "pretrain",
    "cosine_similarity": "similarity",
    "manhattan_similarity": "similarity",
    "QuestionSimilarityModel": "similarity_model",
    "build_model": "similarity_model",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
