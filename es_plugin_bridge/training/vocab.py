"""The models' vocabulary lives in the scoring core (``es_plugin_bridge.core.vocab``): training builds it,
the exported model directory stores it and serving reads it. Re-exported here for training's callers."""

from es_plugin_bridge.core.vocab import PAD, PAD_ID, UNK, UNK_ID, Vocabulary, idf_ln

__all__ = ["PAD", "UNK", "PAD_ID", "UNK_ID", "Vocabulary", "idf_ln"]
