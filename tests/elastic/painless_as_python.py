"""The Painless expressions the product's ``script_score`` bodies use, rewritten as Python so a test can
evaluate them: the vector guard, the two vector functions, ``Math.exp``, ``params.x`` and ``c ? a : b``.
Anything else in a script fails the check, so a new Painless form cannot slip through untested."""

from __future__ import annotations

import re

_TERNARY = re.compile(r"\(([^()?:]+)\?([^()?:]+):([^()?:]+)\)")


def painless_as_python(source: str) -> str:
    """``source`` as a Python expression over ``params``, ``NOVEC``, ``COS``, ``L1`` and ``exp``."""
    expr = (source.replace("doc['vector'].size() == 0", "NOVEC")
            .replace("cosineSimilarity(params.q, 'vector')", "COS")
            .replace("l1norm(params.q, 'vector')", "L1")
            .replace("Math.exp", "exp"))
    expr = re.sub(r"params\.(\w+)", r"params['\1']", expr)
    expr = _TERNARY.sub(r"((\2) if (\1) else (\3))", expr)
    assert re.fullmatch(r"[\w\s.+\-*/()'\[\]<>=!]*", expr), f"unexpected Painless: {source}"
    return expr
