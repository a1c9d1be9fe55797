"""ONNX export of trained checkpoints into verified model directories (``export-onnx``).

``exporters.export.export_checkpoint`` does the work; the manifest (sha256 of every
file, ``es_plugin_bridge.core.manifest``) is torch-free so the server can verify a directory without the
training stack.
"""
