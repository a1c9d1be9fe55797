"""Registry of first-stage engines by name: the CLI's ``--engine`` choices, the default engine of the
rankers and the bridge, and the one way to build an engine.

An engine's module in this package registers it with ``register_engine`` (as a ranker's module does
with ``rankers.register``); every module here is imported on first lookup, so adding an engine means
adding its module and its tests — the CLI, the rankers and the bridge never name it. Modules here stay
cheap to import (numpy at most), since ``--help`` lists the engines. An engine whose code lives in a
higher layer (Elasticsearch, in ``es_plugin_bridge.elastic``) registers its factory as the text
``"module:attr"``, imported only when the engine is built: the client library stays unloaded until
then, and no module here imports a layer above it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, overload

from es_plugin_bridge.engines.base import Engine, Tokens
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.plugins import Registry

__all__ = ["EngineContext", "EngineFactory", "EngineInfo", "build_engine", "default_engine", "engine_info",
           "engine_names", "register_engine"]


@dataclass(frozen=True)
class EngineContext:
    """What a run gives the engine it builds; an engine takes what it needs and ignores the rest.

    ``tokens`` is the run's preprocessing (None: the engine's own, e.g. an existing index's);
    ``params`` the similarities' parameters (``{"bm25": {"k1": 1.2}}``), which a server may need when
    it creates its index; ``cleanup`` is where an engine registers the removal of what it creates for
    this run (a throw-away index) — None means the engine opens what already exists; ``options`` are
    the engine's own (a connection, an index name), documented by its factory.
    """

    tokens: Tokens | None = None
    params: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    progress: bool = True
    cleanup: ExitStack | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


EngineFactory = Callable[[EngineContext], Engine]


@dataclass(frozen=True)
class EngineInfo:
    """How to build an engine and how the CLI offers it.

    ``remote``: the engine is a server reached through the ``--es-*`` connection options, holding
    indices by name (``esrerank search --index``) instead of indexing a ``--corpus`` in process.
    """

    name: str
    factory: EngineFactory | str  # a callable, or "module:attr" imported when the engine is built
    default: bool = False
    remote: bool = False
    description: str = ""

    def load(self) -> EngineFactory:
        """The factory itself, importing its module when it was registered as ``"module:attr"``."""
        if callable(self.factory):
            return self.factory
        module, _, attr = self.factory.partition(":")
        return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


#: Every module of this package but ``base`` and this one registers its engine when imported.
_REGISTRY: Registry[EngineInfo] = Registry("engine", __name__.rpartition(".")[0], skip=("base", "registry"))


@overload
def register_engine(name: str, factory: None = None, *, default: bool = False, remote: bool = False,
                    description: str = "") -> Callable[[EngineFactory], EngineFactory]: ...
@overload
def register_engine(name: str, factory: str, *, default: bool = False, remote: bool = False,
                    description: str = "") -> None: ...
def register_engine(name: str, factory: str | None = None, *, default: bool = False, remote: bool = False,
                    description: str = "") -> Callable[[EngineFactory], EngineFactory] | None:
    """Register an engine: as a decorator of its factory, or with the factory's ``"module:attr"``."""

    def add(built: EngineFactory | str) -> None:
        entry = EngineInfo(name, built, default, remote, description)
        others = [_REGISTRY[other] for other in _REGISTRY if other != name]
        if default and any(e.default for e in others):
            raise ValueError(f"engine {name!r}: {default_engine()!r} is already the default engine")
        _REGISTRY.add(name, entry)

    if factory is not None:
        add(factory)
        return None

    def decorate(fn: EngineFactory) -> EngineFactory:
        add(fn)
        return fn

    return decorate


def engine_names() -> list[str]:
    """Registered engine names: the default first, then by name (the order ``--help`` shows)."""
    return sorted(_REGISTRY.names(), key=lambda name: (not _REGISTRY[name].default, name))


def default_engine() -> str:
    """The engine used when none is chosen (the embedded one)."""
    for entry in _REGISTRY.values():
        if entry.default:
            return entry.name
    raise UserError(f"no default engine is registered (known: {', '.join(_REGISTRY.names())})")


def engine_info(name: str) -> EngineInfo:
    """The registry entry of ``name``; UserError listing the known names if there is none."""
    if name not in _REGISTRY:
        raise UserError(f"unknown engine {name!r} (known: {', '.join(engine_names())})")
    return _REGISTRY[name]


def build_engine(name: str, context: EngineContext | None = None) -> Engine:
    """The engine ``name`` for a run (the one way every caller builds one)."""
    return engine_info(name).load()(context or EngineContext())
