"""A query typed on the command line, checked before it reaches a tokenizer, a hash or a socket.

Python hands invalid UTF-8 in ``argv`` over as lone surrogates (``U+DC80``–``U+DCFF``, the
``surrogateescape`` error handler), and any lone surrogate fails later as a traceback (``str.encode``);
here it is one line naming where it is (``text.sidecar_text.lone_surrogate``, which the library's own
entry points check too).
"""

from __future__ import annotations

from collections.abc import Sequence

from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text.sidecar_text import lone_surrogate


def query_text(words: Sequence[str]) -> str:
    """The words joined by spaces; a lone surrogate (an invalid UTF-8 byte) is a one-line UserError."""
    text = " ".join(words)
    where = lone_surrogate(text)
    if where is not None:
        raise UserError(f"the query {where}")
    return text
