"""What one ``es evaluate`` run makes on the cluster — its throw-away ``esrerank-eval-*`` index, and its
mode's inference endpoints or search pipeline, model and connector — removed on every way out: the end
of the run, an error, Ctrl-C, SIGTERM (``cli.interrupts``). A removal that fails (the cluster down, a
second Ctrl-C) does not hide the run's own outcome and is not silent: one line each on stderr names
what may remain and the request that removes it (issue 34, item 9).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RunCleanup(ExitStack):
    """An ``ExitStack`` whose :meth:`remove` registers one thing to remove from the cluster at ``url``,
    with the request (``method``, ``path``) that removes it by hand; ``remains`` lists what was not."""

    def __init__(self, url: str, echo: Callable[[str], None] = _stderr) -> None:
        super().__init__()
        self.url = url.split(",")[0].strip().rstrip("/")  # one node of an --es-url list answers for all
        self.echo = echo
        self.remains: list[str] = []

    def remove(self, what: str, method: str, path: str, fn: Callable[..., Any], *args: Any,
               **kwargs: Any) -> None:
        """Call ``fn(*args, **kwargs)`` on the way out; if it fails, say that ``what`` may remain."""
        self.callback(self._remove, what, f"curl -X {method} '{self.url}{path}'", fn, args, kwargs)

    def _remove(self, what: str, command: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        try:
            fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - told, then only a signal is passed on
            why = "interrupted" if isinstance(exc, KeyboardInterrupt) else " ".join(str(exc).split())[:200]
            self.remains.append(what)
            self.echo(f"warning: {what} may remain on the cluster ({why}); remove it with: {command}")
            if not isinstance(exc, Exception):
                raise
