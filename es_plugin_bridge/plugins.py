"""Discovery of plug-in modules: the rankers, the engines and the model families register themselves
when their module is imported, and each registry imports its package's modules on first lookup.

``Registry`` is the one registry helper (the Elasticsearch modes use it; the older registries keep
their own lookups for now). One loop for all: every module is tried, and one that fails (a missing
optional library) does not keep the later modules from registering — the first failure is raised
once all were tried.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Collection, Iterable
from typing import Generic, TypeVar

from es_plugin_bridge.errors import UserError

T = TypeVar("T")


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



class Registry(Generic[T]):
    """Entries by name that the modules of one package register when imported; the package is imported
    on the first lookup, so adding an entry means adding its module (and its tests), nothing else.

    ``kind`` names the entries in errors ("unknown mode 'x' (known: ...)"). Entries keep the order
    they were registered in, which is the order of the package's modules by name.
    """

    def __init__(self, kind: str, package: str, skip: Collection[str] = ()) -> None:
        self.kind, self.package, self.skip = kind, package, tuple(skip)
        self._entries: dict[str, T] = {}
        self._loaded = False

    def add(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True  # first: a module being imported may look an entry up
        module = importlib.import_module(self.package)
        import_plugins(self.package, module.__path__, skip=self.skip)

    def names(self) -> list[str]:
        self._load()
        return list(self._entries)

    def values(self) -> list[T]:
        self._load()
        return list(self._entries.values())

    def get(self, name: str) -> T:
        """The entry ``name``; a one-line UserError listing the known names when there is none."""
        self._load()
        try:
            return self._entries[name]
        except KeyError:
            raise UserError(f"unknown {self.kind} {name!r} (known: {', '.join(self._entries)})") from None


__all__ = ["Registry", "import_plugins"]
