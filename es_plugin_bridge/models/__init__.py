"""The papers' neural question-similarity models behind one encoder interface.

``build_model`` makes a :class:`QuestionSimilarityModel` for any of :data:`MODEL_TYPES`;
``TitleDecoder`` pre-trains the RCNN / LSTM / GRU encoders (Lei et al., Section 4.2).
"""

from es_plugin_bridge.models.base import MODEL_TYPES, Encoder
from es_plugin_bridge.models.hyper import PRETRAINABLE_TYPES, hyper_defaults
from es_plugin_bridge.models.pretrain import TitleDecoder
from es_plugin_bridge.models.similarity import cosine_similarity, manhattan_similarity
from es_plugin_bridge.models.similarity_model import QuestionSimilarityModel, build_model

__all__ = [
    "MODEL_TYPES",
    "PRETRAINABLE_TYPES",
    "Encoder",
    "QuestionSimilarityModel",
    "TitleDecoder",
    "build_model",
    "cosine_similarity",
    "hyper_defaults",
    "manhattan_similarity",
]
