"""Discovery of plug-in modules: the rankers, the engines and the model families register themselves
when their module is imported, and each registry imports its package's modules on first lookup.

``Registry`` is the one registry helper: the rankers, the engines, the model families, the model types
and the Elasticsearch/OpenSearch modes are each one ``Registry``. One loop for all: every module is
tried, and one that fails (a missing optional library) does not keep the later modules from
registering — the first failure is raised once all were tried.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any, Generic, TypeVar

from es_plugin_bridge.errors import UserError

T = TypeVar("T")
_MISSING: Any = object()


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
    they were registered in, which is the order of the package's modules by name. ``package`` None: a
    fixed table, nothing to discover. ``same`` says when a second registration under a name is the
    first one again (a module imported twice) rather than a clash; by default, equal entries.
    """

    def __init__(self, kind: str, package: str | None, skip: Collection[str] = (),
                 same: Callable[[T, T], bool] = lambda a, b: a == b) -> None:
        self.kind, self.package, self.skip, self.same = kind, package, tuple(skip), same
        self._entries: dict[str, T] = {}
        self._loaded = package is None
        self._loading = threading.RLock()
        self._importing = False

    def add(self, name: str, entry: T) -> T:
        known = self._entries.get(name)
        if known is not None and not self.same(known, entry):
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry
        return entry

    def _load(self) -> None:
        """Import the package once. Other threads wait until every module registered (a lookup from a
        second thread mid-import saw an empty table: "unknown mode 'rerank' (known: )"); the importing
        thread itself re-enters the lock, since a module being imported may look an entry up."""
        if self._loaded:
            return
        with self._loading:
            if self._loaded or self._importing:
                return
            self._importing = True
            try:
                module = importlib.import_module(self.package)  # type: ignore[arg-type]
                import_plugins(self.package, module.__path__, skip=self.skip)  # type: ignore[arg-type]
            finally:
                self._importing = False
                self._loaded = True

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    # Item access and iteration are the raw table (no discovery, no clash check): what a test patches
    # (monkeypatch.setitem) or inspects before anything is imported.
    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def copy(self) -> Registry[T]:
        """A registry with the same entries (a test registers into the copy and puts the original back)."""
        twin: Registry[T] = Registry(self.kind, self.package, self.skip, self.same)
        with self._loading:
            twin._entries, twin._loaded = dict(self._entries), self._loaded
        return twin

    def __setitem__(self, name: str, entry: T) -> None:
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def names(self) -> list[str]:
        self._load()
        return list(self._entries)

    def values(self) -> list[T]:
        self._load()
        return list(self._entries.values())

    def items(self) -> list[tuple[str, T]]:
        self._load()
        return list(self._entries.items())

    def get(self, name: str, default: Any = _MISSING) -> T:
        """The entry ``name``; a one-line UserError listing the known names when there is none (with a
        ``default``, that default instead, as a dict's ``get``)."""
        self._load()
        if name in self._entries:
            return self._entries[name]
        if default is not _MISSING:
            return default  # type: ignore[no-any-return]
        raise UserError(f"unknown {self.kind} {name!r} (known: {', '.join(sorted(self._entries))})")


__all__ = ["Registry", "import_plugins"]
