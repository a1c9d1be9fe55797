"""``mappings/opensearch/apply.py`` loaded as a module for the tests (it is a script, not a package
module: it runs with the standard library alone, for users without ``es_plugin_bridge``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

OPENSEARCH_FILES = Path(__file__).resolve().parents[1] / "mappings" / "opensearch"


def _load():
    spec = importlib.util.spec_from_file_location("opensearch_apply", OPENSEARCH_FILES / "apply.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


apply = _load()
