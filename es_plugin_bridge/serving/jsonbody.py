"""Request bodies parsed strictly: what ``json.loads`` lets through but the sidecar must refuse.

Python's parser accepts duplicate keys (the last wins, so ``{"top_n": 1, "top_n": 100}`` means what
the last one says, silently), ``NaN``/``Infinity`` (not JSON), lone UTF-16 surrogates (``"\\ud800"``,
which no text pipeline or encoder can take: they cannot even be encoded as UTF-8), and nesting
until it raises RecursionError. Each is a 400 naming the place here, before validation.

The way out has its own rule: :func:`connector_float` writes every number a connector reads in at
most 18 characters, the longest float literal OpenSearch's ml-commons reads as a number it can use.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_RAW = re.compile(rb"\xed[\xa0-\xbf]")


class BodyError(ValueError):
    """A body that is not acceptable JSON; ``field`` is the path of the culprit when known."""

    def __init__(self, message: str, field: str = "(body)") -> None:
        super().__init__(message)
        self.field = field


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _may_hold_surrogates(data: bytes) -> bool:
    """Whether ``data`` has a ``\\uD800``-``\\uDFFF`` escape or raw UTF-8-encoded surrogate bytes at all
    (most bodies have neither, and then their strings need no scan)."""
    if b"\x00" in data[:4] or data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16/32: scan to be sure
        return True
    return _ESCAPE.search(data) is not None or _RAW.search(data) is not None


def _where(path: tuple) -> str:
    """``(((), "documents"), 1)`` → ``documents.1`` (paths are built as linked pairs, joined on error)."""
    parts: list[str] = []
    while path:
        path, key = path
        parts.append(str(key))
    return ".".join(reversed(parts)) or "(body)"


def _check(value: Any, strings: bool = True) -> None:
    """Depth and (when ``strings``) lone surrogates, without recursion (the body may be anything).

    Depth counts objects and arrays only: the top one is at depth 0, and one deeper than MAX_DEPTH is
    refused whether or not the strings are scanned (a string at the bottom adds no level)."""
    stack: list[tuple[Any, tuple, int]] = [(value, (), 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH and isinstance(node, (dict, list)):
            raise BodyError(f"the body is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, dict):
            for key, item in node.items():
                if strings and _SURROGATE.search(key):
                    where = _where(path)
                    raise BodyError(f"{where}: a key holds a lone UTF-16 surrogate", where)
                if strings or isinstance(item, (dict, list)):
                    stack.append((item, (path, key), depth + 1))
        elif isinstance(node, list):
            stack.extend((item, (path, i), depth + 1) for i, item in enumerate(node)
                         if strings or isinstance(item, (dict, list)))
        elif strings and isinstance(node, str) and _SURROGATE.search(node):
            where = _where(path)
            raise BodyError(f"{where}: holds a lone UTF-16 surrogate (not valid Unicode text)", where)


def parse_body(data: bytes) -> Any:
    """The JSON value of ``data``; BodyError (a 400) for anything but plain, sane JSON."""
    try:
        value = json.loads(data, object_pairs_hook=_object, parse_constant=_constant)
    except _DuplicateKey as exc:
        raise BodyError(f"{exc.key}: given twice in one JSON object", exc.key) from None
    except RecursionError:
        raise BodyError(f"the body is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity, a 5,000-digit int
        raise BodyError(f"the body is not valid JSON ({exc})") from None
    _check(value, strings=_may_hold_surrogates(data))
    return value


#: json-smart in permissive mode, the parser ml-commons' ``JsonPath.read`` uses, turns a float literal
#: of more than 18 characters into a ``BigDecimal`` (``JSONParserBase.extractFloat``), which
#: ml-commons' ``(Double)`` casts refuse. 12 significant digits keep every finite double ≥ 0 within 18
#: (``1.23456789012e-300``, ``1234567890120000.0``); 11 for a negative one leave room for its sign.
CONNECTOR_MAX_CHARS = 18


def connector_float(value: float) -> float:
    """``value`` rounded so that its JSON text (Python's shortest repr) is at most 18 characters.

    For every float a connector reads (rerank scores; embeddings too, where an engine parses them
    with json-smart). 12 significant digits (11 below zero) leave a float32 unchanged unless the value
    lies within 1e-12 of a float32 rounding tie; the order of results must still come from the
    unrounded values. The one exception: Python writes a negative value rounded into (−1e16, −1e15]
    with 16 digits before the point (19 characters); no score or unit-vector component is there.
    """
    return float(f"{value:.{12 if value >= 0 else 11}g}")
