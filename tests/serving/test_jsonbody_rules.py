"""The sidecar's strict JSON body (``es_plugin_bridge/serving/jsonbody.py``) at its edges: the nesting
limit at 32/33 levels for objects and arrays, with and without strings to scan; lone surrogates in keys
and values at every place, in UTF-8, UTF-16 and UTF-32 bodies (``json.loads`` detects the encoding from
the first bytes, RFC 8259 §8.1 / RFC 4627 §3, and decodes with ``surrogatepass``); the names of the
culprits; the NaN/Infinity refusal; and the 18-character numbers written for connectors.

Real text: AskUbuntu titles (``es_plugin_bridge/samples/askubuntu-pairs``) with their curly quotes and
ellipses, sent as Python's ``json.dumps`` writes them (``\\u201c`` escapes), must come back unchanged.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from es_plugin_bridge.serving import jsonbody
from es_plugin_bridge.serving.jsonbody import MAX_DEPTH, BodyError, connector_float, parse_body

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"


def refusal(data: bytes) -> BodyError:
    with pytest.raises(BodyError) as info:
        parse_body(data)
    return info.value


def nested(levels: int, leaf: str, opener: str = "[", closer: str = "]") -> str:
    """``levels`` arrays (or ``{"a": `` objects) around ``leaf``."""
    return opener * levels + leaf + closer * levels


@pytest.fixture(scope="module")
def titles() -> list[str]:
    with TITLES.open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    non_ascii = [t for row in rows for t in row[1:] if any(ord(c) > 127 for c in t)]
    assert len(non_ascii) >= 20
    return non_ascii[:20]


# -- nesting --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("opener", "closer"), [("[", "]"), ('{"a": ', "}")])
@pytest.mark.parametrize("leaf", ['""', '"x"', "1", '"\\ud83d\\ude00"', "[]", "{}"])
def test_the_depth_limit_counts_objects_and_arrays_whatever_the_strings(opener, closer, leaf):
    """The top container is at depth 0; one at depth 33 is refused. A string at the bottom adds no
    level, whether or not the body has an escape that makes the strings scanned (an emoji, as
    ``json.dumps`` writes it, is the escape pair ``\\ud83d\\ude00``)."""
    container = leaf in ("[]", "{}")
    deepest_ok = MAX_DEPTH if container else MAX_DEPTH + 1  # the leaf container is a level itself
    body = nested(deepest_ok, leaf, opener, closer)
    assert parse_body(body.encode()) == json.loads(body)
    exc = refusal(nested(deepest_ok + 1, leaf, opener, closer).encode())
    assert str(exc) == "the body is nested more than 32 levels deep" and exc.field == "(body)"


def test_the_depth_limit_holds_for_a_mixed_path_and_each_branch():
    """Objects and arrays alternate; a shallow sibling does not hide a deep branch, in either order."""
    deep = nested(MAX_DEPTH + 1, '"x"', '{"a": [', "]}")  # 66 containers: far too deep
    ok = nested(MAX_DEPTH // 2, "1", '{"a": [', "]}")  # 32 containers, the last one at depth 31
    assert parse_body(ok.encode()) == json.loads(ok)
    for body in (f'{{"ok": {ok}, "deep": {deep}}}', f'[{deep}, {ok}]', f'[{ok}, {deep}]'):
        assert "nested more than 32" in str(refusal(body.encode()))
    at_limit = nested(MAX_DEPTH, "[]")  # 33 arrays: the innermost at depth 32
    assert parse_body(f'[{at_limit[1:-1]}, "\\ud83d\\ude00"]'.encode())[1] == "\U0001F600"


def test_deep_nesting_that_the_parser_itself_refuses_has_the_same_answer():
    exc = refusal(nested(5000, "1").encode())
    assert str(exc) == "the body is nested more than 32 levels deep" and exc.field == "(body)"


# -- lone surrogates ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("body", "field", "message"), [
    ('"\\ud800"', "(body)", "(body): holds a lone UTF-16 surrogate (not valid Unicode text)"),
    ('{"\\ud800": 1}', "(body)", "(body): a key holds a lone UTF-16 surrogate"),
    ('{"documents": [{"title": "t", "\\udfff": "b"}]}', "documents.0",
     "documents.0: a key holds a lone UTF-16 surrogate"),
    ('{"query": "q", "documents": ["a", {"body": ["x", "y\\udbffz"]}]}', "documents.1.body.1",
     "documents.1.body.1: holds a lone UTF-16 surrogate (not valid Unicode text)"),
])
def test_a_lone_surrogate_is_named_where_it_is(body, field, message):
    exc = refusal(body.encode())
    assert exc.field == field and str(exc) == message


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16", "utf-32-le", "utf-32-be", "utf-32"])
def test_utf16_and_utf32_bodies_are_scanned_too(encoding):
    """``json.loads`` reads UTF-16/32 with or without a BOM (``json.detect_encoding``), so an escaped
    lone surrogate arrives as text the regexes over UTF-8 bytes cannot see, and a raw one is let through
    by ``surrogatepass``: both must be refused, and a clean body of the same encoding accepted."""
    escaped = '{"query": "q", "documents": ["a", "\\ud800"]}'.encode(encoding)
    assert refusal(escaped).field == "documents.1"
    raw = '{"query": "\ud800", "documents": ["a"]}'.encode(encoding, "surrogatepass")
    assert refusal(raw).field == "query"
    clean = '{"query": "q\\ud83d\\ude00", "documents": ["\u201cgrub\u201d"]}'.encode(encoding)
    assert parse_body(clean) == {"query": "q\U0001F600", "documents": ["\u201cgrub\u201d"]}


def test_plain_bodies_are_parsed_without_scanning_their_strings(monkeypatch, titles):
    """Most bodies have no ``\\uD8..``-``\\uDF..`` escape and no raw surrogate bytes: their strings are not
    scanned (the scan is the slow part). Real titles, as ``json.dumps`` escapes them, are such bodies."""
    searched: list[str] = []

    class Spy:
        def search(self, text: str):
            searched.append(text)
            return None

    monkeypatch.setattr(jsonbody, "_SURROGATE", Spy())
    body = {"query": titles[0], "documents": [{"title": t, "body": t} for t in titles[1:]]}
    for data in (json.dumps(body).encode(), json.dumps(body, ensure_ascii=False).encode()):
        assert parse_body(data) == body
    assert searched == []
    parse_body(json.dumps({"query": "\U0001F600"}).encode())  # an escaped pair: scanned, and accepted
    assert "\U0001F600" in searched


# -- not JSON -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_named_in_the_refusal(constant):
    exc = refusal(f'{{"query": "q", "first_stage_scores": [1.0, {constant}]}}'.encode())
    assert str(exc).startswith("the body is not valid JSON (")
    assert f"{constant.lstrip('-')} is not a JSON number" in str(exc) and exc.field == "(body)"


def test_a_duplicate_key_is_named_and_other_garbage_is_the_body():
    exc = refusal(b'{"query": "q", "documents": [{"title": "t", "title": "u"}]}')
    assert str(exc) == "title: given twice in one JSON object" and exc.field == "title"
    for data in (b"", b"{", b"\xff\xfe\xff", b'{"a": 1} x'):
        exc = refusal(data)
        assert exc.field == "(body)" and str(exc).startswith("the body is not valid JSON")
    assert BodyError("m").field == "(body)"


# -- numbers written for connectors ---------------------------------------------------------------------
@pytest.mark.parametrize(("value", "text"), [
    (0.123456789012345, "0.123456789012"),  # [0, 1): 12 significant digits
    (0.999999999996, "0.999999999996"), (0.9999999999996, "1.0"),
    (3.14159265358979, "3.14159265359"),
    (1.23456789012345e-300, "1.23456789012e-300"),  # 18 characters, the most a connector reads
    (1.23456789012345e15, "1234567890120000.0"),
    (-0.123456789012345, "-0.12345678901"),  # below 0: 11 digits, room for the sign
    (-1.23456789012345e-300, "-1.2345678901e-300"),
    (-7.5, "-7.5"), (0.0, "0.0"), (-0.0, "-0.0"), (1.0, "1.0"),
])
def test_connector_floats_keep_12_digits_11_below_zero_in_18_characters(value, text):
    got = connector_float(value)
    assert json.dumps(got) == text and len(text) <= jsonbody.CONNECTOR_MAX_CHARS
