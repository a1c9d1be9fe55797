"""A query typed on the command line, checked before it reaches a tokenizer, a hash or a socket.

Python hands invalid UTF-8 in ``argv`` over as lone surrogates (``U+DC80``–``U+DCFF``, the
``surrogateescape`` error handler), and any lone surrogate fails later as a traceback (``str.encode``);
here it is one line naming where it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from es_plugin_bridge.errors import UserError


def query_text(words: Sequence[str]) -> str:
    """The words joined by spaces; a lone surrogate (an invalid UTF-8 byte) is a one-line UserError."""
    text = " ".join(words)
    for position, char in enumerate(text, start=1):
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            raise UserError(f"the query is not valid UTF-8: byte 0x{code - 0xDC00:02X} at character "
                            f"{position}")
        if 0xD800 <= code <= 0xDFFF:
            raise UserError(f"the query holds a lone surrogate U+{code:04X} at character {position}, "
                            "which is not Unicode text")
    return text
