"""Placeholders for ``model`` and ``fused`` until the model code exists.

They are registered now so that the CLI contract's forms fail with the right message today
(``ranker 'model' needs --model DIR``). The models work replaces this module with real rankers
registered under the same names, with ``needs_model=True``.
"""

from __future__ import annotations

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.rankers import register
from es_plugin_bridge.rankers.base import Ranker, RankerContext


def _not_yet(name: str):
    def factory(context: RankerContext) -> Ranker:
        raise UserError(f"ranker {name!r}: loading a model directory is not implemented yet "
                        f"({context.model_dir})")

    return factory


register("model", needs_model=True, description="neural score alone")(_not_yet("model"))
register("fused", needs_model=True, description="beta fusion of first-stage, BOW and neural scores")(
    _not_yet("fused"))
