"""One ``SidecarTarget`` (URL, token, timeout) built from one set of CLI options with one default each,
passed whole to what calls the sidecar (issue 28: the options were declared twice, with 2 s and 10 s)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from es_plugin_bridge.bridge.sidecar_client import SidecarClient
from es_plugin_bridge.bridge.sidecar_target import DEFAULT_TIMEOUT, DEFAULT_URL, SidecarTarget
from es_plugin_bridge.errors import UserError

CLI = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "cli"


def test_a_target_is_checked_once_and_keeps_its_parts():
    target = SidecarTarget("https://reranker.internal:8443/base/", "tok-1", 0.5)
    assert (target.url, target.token, target.timeout) == ("https://reranker.internal:8443/base", "tok-1", 0.5)
    assert SidecarTarget() == SidecarTarget(DEFAULT_URL, None, DEFAULT_TIMEOUT)
    assert SidecarTarget(token="").token == ""  # an empty ESRERANK_TOKEN means no token, not an error
    embedder = SidecarClient.reaching(target, timeout=60.0)
    assert (embedder.url, embedder.token, embedder.timeout) == (target.url, "tok-1", 60.0)


@pytest.mark.parametrize(("args", "message"), [
    (("127.0.0.1:8080",), "must start with http:// or https://"),
    (("http://",), "has no host"),
    (("http://s:1", None, 0.0), "timeout must be > 0"),
    (("http://s:1", "two words"), "sidecar token must be printable ASCII"),
])
def test_a_bad_target_is_a_one_line_error(args, message):
    with pytest.raises(UserError, match=message):
        SidecarTarget(*args)


def test_the_sidecar_options_are_declared_once():
    """No CLI module declares --timeout or --token itself: es_options.SIDECAR_OPTIONS is the one place
    (``es setup/index/search``, ``es evaluate`` and ``search`` all take it). ``serve``'s ``--token`` is
    the token the sidecar itself requires, not a client's setting."""
    declared: dict[str, list[str]] = {}
    for path in sorted(p for p in CLI.glob("*.py") if p.name != "serve.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("option", "Option"):
                flags = [a.value for a in node.args if isinstance(a, ast.Constant)]
                flags += [e.value for a in node.args if isinstance(a, ast.List) for e in a.elts
                          if isinstance(e, ast.Constant)]
                for flag in set(flags) & {"--timeout", "--token", "--sidecar"}:
                    declared.setdefault(flag, []).append(path.name)
    assert declared == {}, declared
