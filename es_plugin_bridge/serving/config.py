"""config.json of an exported model directory: the schema lives in the scoring core
(``es_plugin_bridge.core.model_config``, edit it there); re-exported here for serving's callers."""

from es_plugin_bridge.core.model_config import (
    FORMAT,
    FORMAT_VERSION,
    FUSION_KEYS,
    MAX_DIMENSION,
    MAX_LENGTH,
    MAX_PLATT,
    MAX_VOCAB,
    MAX_WEIGHT,
    Beta,
    ExportedConfig,
    Verification,
    parse_config,
)

__all__ = ["FORMAT", "FORMAT_VERSION", "FUSION_KEYS", "MAX_DIMENSION", "MAX_LENGTH", "MAX_PLATT", "MAX_VOCAB",
           "MAX_WEIGHT", "Beta", "ExportedConfig", "Verification", "parse_config"]
