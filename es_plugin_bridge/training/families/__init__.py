"""Model families by name: each module of this package registers one :class:`ModelFamily`.

A model type names its family in ``models.registry`` (``family="vocabulary"``); :func:`family_of`
finds the family object, importing every module here on first lookup, so adding a family is adding
its module (plus its model types' registry entries and its serving input adapter) — the trainer,
the checkpoint and the exporter never change.
"""

from __future__ import annotations

from es_plugin_bridge.models.registry import model_type
from es_plugin_bridge.plugins import Registry
from es_plugin_bridge.training.families.base import BuildSetup, Built, ModelFamily, Probe

#: A family module imported twice registers a new object of the same class: the same family.
_FAMILIES: Registry[ModelFamily] = Registry("model family", __name__, skip=("base",),
                                            same=lambda a, b: type(a) is type(b))


def register_family(family: ModelFamily) -> ModelFamily:
    """Register ``family`` under its name (a second, different object under one name is a bug)."""
    return _FAMILIES.add(family.name, family)


def family_named(name: str) -> ModelFamily:
    """The family registered as ``name``; UserError listing the known ones."""
    return _FAMILIES.get(name)


def family_of(type_name: str) -> ModelFamily:
    """The family of a registered model type; UserError for an unknown type."""
    return family_named(model_type(type_name).family)


__all__ = ["BuildSetup", "Built", "ModelFamily", "Probe", "family_named", "family_of", "register_family"]
