"""schemathesis hooks for ``st run`` started in this repository (``schemathesis.toml`` names this file):
a case generated as valid that breaks a rule the document states in words (``stated_rules``) is not sent
as a valid one, since the server rightly refuses it 400; every check stays on for every case that is sent.
The in-process fuzz test does not load this file: it sends those cases too and asserts their 400."""

from __future__ import annotations

import sys
from pathlib import Path

import schemathesis
from schemathesis import GenerationMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stated_rules import breaks_a_stated_rule, served_preprocessor  # noqa: E402

_PREPROCESSORS: dict[int, object] = {}


@schemathesis.hook
def filter_case(context, case) -> bool:
    """Keep every case but a valid one that breaks a stated rule."""
    if case.meta is None or case.meta.generation.mode != GenerationMode.POSITIVE:
        return True
    schema = case.operation.schema.raw_schema
    preprocessor = _PREPROCESSORS.setdefault(id(schema), served_preprocessor(schema))
    return not breaks_a_stated_rule(case.operation.path, case.body, case.query, preprocessor)
