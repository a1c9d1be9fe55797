"""ONNX export of trained checkpoints into verified model directories (``export-onnx``).

``exporters.export.export_checkpoint`` does the work; ``exporters.manifest`` (sha256 of every
file) is torch-free so the server can verify a directory without the training stack.
"""
