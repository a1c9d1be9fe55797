"""The Cohere client libraries the sidecar is tested with (the ``dev`` extra): a test that drives one
is skipped, naming the package to install, where it is missing (the torch-free venv has some only)."""

from __future__ import annotations

import importlib.util

import pytest


def needs(module: str, package: str) -> pytest.MarkDecorator:
    try:
        missing = importlib.util.find_spec(module) is None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        missing = True
    return pytest.mark.skipif(missing, reason=f"{package} is not installed (pip install '.[dev]')")
