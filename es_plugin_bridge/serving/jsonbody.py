"""Request bodies parsed strictly: what ``json.loads`` lets through but the sidecar must refuse.

Python's parser accepts duplicate keys (the last wins, so ``{"top_n": 1, "top_n": 100}`` means what
the last one says, silently), ``NaN``/``Infinity`` (not JSON), lone UTF-16 surrogates (``"\\ud800"``,
which no text pipeline or encoder can take: they cannot even be encoded as UTF-8), and nesting
until it raises RecursionError. Each is a 400 naming the place here, before validation.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")


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


def _check(value: Any) -> None:
    """Depth and lone surrogates, without recursion (the body may be anything)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        node, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BodyError(f"the body is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, str):
            if _SURROGATE.search(node):
                where = path or "(body)"
                raise BodyError(f"{where}: holds a lone UTF-16 surrogate (not valid Unicode text)", where)
        elif isinstance(node, dict):
            for key, item in node.items():
                child = f"{path}.{key}" if path else str(key)
                if _SURROGATE.search(key):
                    where = path or "(body)"
                    raise BodyError(f"{where}: a key holds a lone UTF-16 surrogate", where)
                stack.append((item, child, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, f"{path}.{i}" if path else str(i), depth + 1) for i, item in enumerate(node))


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
    _check(value)
    return value
