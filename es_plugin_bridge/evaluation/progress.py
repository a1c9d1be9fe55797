"""Progress bars on stderr (tqdm); shown on a terminal, silent when output is redirected or disabled."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


def progress(items: Iterable[T], desc: str, total: int | None = None, enabled: bool = True) -> Iterator[T]:
    """Iterate ``items`` with a progress bar labelled ``desc``."""
    yield from tqdm(items, desc=desc, total=total, file=sys.stderr, leave=False, dynamic_ncols=True,
                    disable=None if enabled else True, mininterval=0.2)
