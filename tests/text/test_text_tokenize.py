"""The tokenizer does exactly what its docstring says."""

from __future__ import annotations

import re
import unicodedata

import pytest

from es_plugin_bridge.text import Preprocessor, TextOptions, tokenize
from es_plugin_bridge.text.tokenize import CODE_MARK, DATE_MARK, URL_MARK, _combining_marks


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("How do I install 12.04?", ["How", "do", "I", "install", "12.04"]),
        ("don't can't ubuntu's", ["don't", "can't", "ubuntu's"]),
        ("wi-fi wifi apt-get", ["wi-fi", "wifi", "apt-get"]),
        ("x86_64 __init__ a__b", ["x86_64", "init", "a", "b"]),
        ("1,000 users, 2 groups", ["1,000", "users", "2", "groups"]),
        ("e.g. askubuntu.com. End...", ["e.g", "askubuntu.com", "End"]),
        ("Hello, world! (really?) -- 'quoted' #tag @me", ["Hello", "world", "really", "quoted", "tag", "me"]),
        ("'leading trailing- -both-", ["leading", "trailing", "both"]),
        ("naïve café", ["naïve", "café"]),
        ("", []),
    ],
)
def test_documented_cases(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_combining_marks_do_not_split_words() -> None:
    # "cafe" + U+0301 (decomposed acute) and an Arabic word with harakat are one token each.
    assert tokenize("cafe\u0301 \u0645\u064e\u062f\u0652\u0631\u064e\u0633\u064e\u0629") == [
        "cafe\u0301", "\u0645\u064e\u062f\u0652\u0631\u064e\u0633\u064e\u0629"]


def test_placeholders_become_marker_tokens_and_split_words() -> None:
    text = f"see{URL_MARK}now {CODE_MARK} ls -la {DATE_MARK}"
    assert tokenize(text) == ["see", "__url__", "now", "__code__", "ls", "la", "__date__"]


def test_user_text_cannot_forge_a_marker() -> None:
    # Private-use placeholders typed by a user are removed before tokenising; "__url__" is a word "url".
    p = Preprocessor(TextOptions())
    assert p.text_tokens(f"a{URL_MARK}b __url__") == ["ab", "url"]


def test_typographic_apostrophes_are_unified() -> None:
    p = Preprocessor(TextOptions())
    assert p.text_tokens("Don\u2019t won\u2018t") == ["don't", "won't"]


@pytest.mark.parametrize(("mark", "marker"), [(URL_MARK, "__url__"), (CODE_MARK, "__code__"),
                                              (DATE_MARK, "__date__")])
def test_each_placeholder_alone_becomes_its_marker(mark: str, marker: str) -> None:
    assert tokenize(f"fixed on {mark} by 12.04") == ["fixed", "on", marker, "by", "12.04"]
    assert tokenize(mark) == [marker]


def test_text_without_placeholders_keeps_words_that_look_like_markers() -> None:
    assert tokenize("__url__ url __code__") == ["url", "url", "code"]


def test_every_combining_mark_of_the_bmp_joins_a_word_and_nothing_else_does() -> None:
    marks = [chr(cp) for cp in range(0x10000) if unicodedata.category(chr(cp)).startswith("M")]
    assert len(marks) > 1000
    assert tokenize(" ".join(f"a{m}b" for m in marks)) == [f"a{m}b" for m in marks]
    # Spacing accents, symbols and punctuation next to marks split words.
    assert tokenize("a\u00b4b a\u02d8b a\u2019b a\u00a0b") == ["a", "b", "a", "b", "a", "b", "a", "b"]


def test_one_character_and_connector_edges() -> None:
    assert tokenize("a") == ["a"] and tokenize("7") == ["7"] and tokenize("-") == []
    assert tokenize("a..b a--b a''b") == ["a", "b", "a", "b", "a", "b"]
    assert tokenize("1,2 a,b 1, 2") == ["1,2", "a", "b", "1", "2"]


def test_the_combining_mark_class_is_exactly_the_marks_of_the_bmp() -> None:
    # Called here, not only at import, so that a wrong class (a range cut short, a mark left out) fails.
    mark_class = re.compile(f"[{_combining_marks()}]")
    got = {cp for cp in range(0x10000) if mark_class.fullmatch(chr(cp))}
    assert got == {cp for cp in range(0x10000) if unicodedata.category(chr(cp)).startswith("M")}
