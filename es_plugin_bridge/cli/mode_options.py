"""The CLI's view of the mode registry: ``--mode``'s choices and each mode's own options, read when
``--help`` or a command runs, not when this module is imported, so that a mode registered later (a new
module, a test's toy mode) is offered with nothing in ``cli/`` edited.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from es_plugin_bridge.elastic.modes import ModeOption


def _names() -> list[str]:
    from es_plugin_bridge.elastic.modes import mode_names  # the registry loads its modes on first use

    return list(mode_names())


def _options() -> tuple[ModeOption, ...]:
    from es_plugin_bridge.elastic.modes import mode_options

    return mode_options()


class ModeChoice(click.Choice):
    """``click.Choice`` over the registered modes, read each time click asks."""

    def __init__(self) -> None:
        super().__init__([])

    @property  # type: ignore[override]
    def choices(self) -> Sequence[str]:
        return _names()

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:  # click.Choice.__init__ sets it; the registry rules
        pass


def _click_option(flag: str, dest: str, help_text: str, choices: tuple[str, ...]) -> click.Option:
    kind = click.Choice(list(choices)) if choices else click.STRING
    return click.Option([flag, dest], type=kind, default=None, help=help_text, expose_value=True)


class ModeCommand(click.Command):
    """A command that offers every mode's own options (``ModeSpec.options``) beside its own, and hands
    their values to the callback as one ``mode_options`` dict (the callback names no mode's option)."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        own = super().get_params(ctx)
        names = {p.name for p in own}
        extra = [_click_option(o.flag, o.dest, o.help, o.choices)
                 for o in _options() if o.dest not in names]
        return [*own[:-1], *extra, own[-1]]  # the help option stays last

    def invoke(self, ctx: click.Context) -> Any:
        declared = {o.dest for o in _options()}
        ctx.params["mode_options"] = {k: ctx.params.pop(k) for k in list(ctx.params) if k in declared}
        return super().invoke(ctx)
