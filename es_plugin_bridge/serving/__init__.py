"""Serving an exported model directory: verification, loading and onnxruntime scoring (no torch)."""

from es_plugin_bridge.core.model_config import ExportedConfig
from es_plugin_bridge.serving.model_dir import COMPONENTS, ModelDirectory

__all__ = ["COMPONENTS", "ExportedConfig", "ModelDirectory"]
