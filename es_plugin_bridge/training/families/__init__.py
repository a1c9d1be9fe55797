"""Model families by name: each module of this package registers one :class:`ModelFamily`.

A model type names its family in ``models.registry`` (``family="vocabulary"``); :func:`family_of`
finds the family object, importing every module here on first lookup, so adding a family is adding
its module (plus its model types' registry entries and its serving input adapter) — the trainer,
the checkpoint and the exporter never change.
"""

from __future__ import annotations

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.registry import model_type
from es_plugin_bridge.plugins import import_plugins
from es_plugin_bridge.training.families.base import BuildSetup, Built, ModelFamily, Probe

_FAMILIES: dict[str, ModelFamily] = {}


def register_family(family: ModelFamily) -> ModelFamily:
    """Register ``family`` under its name (a second, different object under one name is a bug)."""
    known = _FAMILIES.get(family.name)
    if known is not None and type(known) is not type(family):
        raise ValueError(f"model family {family.name!r} is registered twice")
    _FAMILIES[family.name] = family
    return family


def _load() -> None:
    import_plugins(__name__, __path__, skip=("base",))


def family_named(name: str) -> ModelFamily:
    """The family registered as ``name``; UserError listing the known ones."""
    if name not in _FAMILIES:
        _load()
    found = _FAMILIES.get(name)
    if found is None:
        raise UserError(f"unknown model family {name!r}; known: {', '.join(sorted(_FAMILIES))}")
    return found


def family_of(type_name: str) -> ModelFamily:
    """The family of a registered model type; UserError for an unknown type."""
    return family_named(model_type(type_name).family)


__all__ = ["BuildSetup", "Built", "ModelFamily", "Probe", "family_named", "family_of", "register_family"]
