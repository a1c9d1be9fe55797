"""Registry of rankers by name (``given``, every first-stage similarity, later ``model`` and ``fused``).

A ranker module registers itself with ``@register("name", ...)``; every module of this package is
imported on first lookup, so adding a ranker means adding a module here (or calling ``register``
from anywhere before the lookup) — the evaluator never changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.plugins import Registry
from es_plugin_bridge.rankers.base import TASKS, Ranker, RankerContext, TokenCache, unique_questions

__all__ = ["RankerInfo", "Ranker", "RankerContext", "TokenCache", "TASKS", "available", "build",
           "check", "info", "register", "unique_questions"]

Factory = Callable[[RankerContext], Ranker]


@dataclass(frozen=True)
class RankerInfo:
    """How to build a ranker and what it needs."""

    name: str
    factory: Factory
    tasks: frozenset[str]
    needs_model: bool = False
    description: str = ""


_RANKERS: Registry[RankerInfo] = Registry("ranker", __name__, skip=("base",))


def register(name: str, *, tasks: Sequence[str] = TASKS, needs_model: bool = False,
             description: str = "") -> Callable[[Factory], Factory]:
    """Decorator registering a factory (usually a Ranker subclass) under ``name``."""

    def decorate(factory: Factory) -> Factory:
        unknown = set(tasks) - set(TASKS)
        if unknown:
            raise ValueError(f"ranker {name!r}: unknown tasks {sorted(unknown)}")
        _RANKERS.add(name, RankerInfo(name, factory, frozenset(tasks), needs_model, description))
        return factory

    return decorate


def available() -> list[str]:
    """Registered ranker names, in registration order."""
    return _RANKERS.names()


def info(name: str) -> RankerInfo:
    """The registry entry of ``name``; UserError listing the known names if there is none."""
    return _RANKERS.get(name)


def check(names: Sequence[str], task: str, *, has_model: bool) -> None:
    """Fail early, before any work, when a ranker is unknown, unfit for ``task`` or lacks --model."""
    if not names:
        raise UserError("no ranker given (--rankers NAME[,NAME...])")
    if len(set(names)) != len(names):
        raise UserError(f"a ranker is listed twice in --rankers {','.join(names)}")
    for name in names:
        entry = info(name)
        if task not in entry.tasks:
            raise UserError(f"ranker {name!r} does not support --task {task} "
                            f"(it supports: {', '.join(sorted(entry.tasks))})")
        if entry.needs_model and not has_model:
            raise UserError(f"ranker {name!r} needs --model DIR")


def build(name: str, context: RankerContext) -> Ranker:
    """Build the ranker ``name`` for this run's context."""
    entry = info(name)
    if name in context.overrides:
        return context.overrides[name](context)
    if entry.needs_model and context.model_dir is None:
        raise UserError(f"ranker {name!r} needs --model DIR")
    return entry.factory(context)
