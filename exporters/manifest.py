"""manifest.json of a model directory: defined by the scoring core (``es_plugin_bridge.core.manifest``),
written here by the exporter and verified there by the server. Re-exported for the exporter's callers."""

from es_plugin_bridge.core.manifest import MANIFEST, manifest_digest, read_verified, write_manifest

__all__ = ["MANIFEST", "manifest_digest", "read_verified", "write_manifest"]
