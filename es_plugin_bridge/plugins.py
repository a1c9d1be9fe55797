"""Discovery of plug-in modules: the rankers, the engines and the model families register themselves
when their module is imported, and each registry imports its package's modules on first lookup.

One loop for the three: every module is tried, and one that fails (a missing optional library) does
not keep the later modules from registering — the first failure is raised once all were tried.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Collection, Iterable


def import_plugins(package: str, path: Iterable[str], skip: Collection[str] = ()) -> None:
    """Import every module of ``package`` (its ``__path__``) except ``skip``; raise the first failure."""
    failure: Exception | None = None
    for module in pkgutil.iter_modules(path):
        if module.name not in skip:
            try:
                importlib.import_module(f"{package}.{module.name}")
            except Exception as exc:  # re-raised below, once every module was tried
                failure = failure or exc
    if failure is not None:
        raise failure


__all__ = ["import_plugins"]
