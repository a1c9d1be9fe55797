"""HTML to text on real AskUbuntu bodies (HTML) and SemEval bodies (plain text with entities)."""

from __future__ import annotations

import re
from pathlib import Path

import lxml.etree
import lxml.html
import pytest

import es_plugin_bridge
from es_plugin_bridge.text import Preprocessor, TextOptions

SAMPLES = Path(es_plugin_bridge.__file__).parent / "samples"


def _val_bodies() -> list[str]:
    """Every HTML body of the shipped val.tsv (title and body split at the first tag)."""
    bodies = []
    with open(SAMPLES / "askubuntu-pairs" / "val.tsv", encoding="utf-8") as f:
        for line in f:
            for question in line.rstrip("\n").split("\t")[1:]:
                start = question.find("<")
                if start >= 0:
                    bodies.append(question[start:])
    return bodies


VAL_BODIES = _val_bodies()


def _semeval_bodies() -> list[str]:
    tree = lxml.etree.parse(str(SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"))
    return [el.text or "" for el in tree.iter("OrgQBody", "RelQBody")]


def _outermost_code_blocks(body: str) -> int:
    root = lxml.html.fragment_fromstring(body, create_parent="div")
    return len(root.xpath("(.//pre | .//code)[not(ancestor::pre or ancestor::code)]"))


def test_the_sample_has_code_and_links() -> None:
    assert len(VAL_BODIES) == 2000
    assert sum("<pre><code>" in b for b in VAL_BODIES) > 100
    assert sum("<a href" in b for b in VAL_BODIES) > 100


def test_code_keep_remove_prefix_on_real_bodies() -> None:
    keep = Preprocessor(TextOptions(body_words=None))
    remove = Preprocessor(TextOptions(body_words=None, code="remove"))
    prefix = Preprocessor(TextOptions(body_words=None, code="prefix"))
    with_code = [b for b in VAL_BODIES if "<code>" in b or "<pre" in b]
    for body in with_code:
        kept, removed, prefixed = keep.text_tokens(body), remove.text_tokens(body), prefix.text_tokens(body)
        # prefix = keep plus one __code__ before each outermost <pre>/<code> element
        assert [t for t in prefixed if t != "__code__"] == kept
        assert prefixed.count("__code__") == _outermost_code_blocks(body)
        # remove = keep minus the code's tokens: a subsequence, strictly shorter when code had words
        it = iter(kept)
        assert all(tok in it for tok in removed)
        assert "__code__" not in kept and "__code__" not in removed
    shorter = sum(len(remove.text_tokens(b)) < len(keep.text_tokens(b)) for b in with_code)
    assert shorter > 0.9 * len(with_code)


def test_real_body_with_pre_code_block() -> None:
    body = next(b for b in VAL_BODIES if "<pre><code>save.recent=1" in b)
    prefixed = Preprocessor(TextOptions(code="prefix", body_words=None)).text_tokens(body)
    start = prefixed.index("__code__")
    assert prefixed[start + 1:start + 5] == ["save.recent", "1", "save.session", "1"]
    removed = Preprocessor(TextOptions(code="remove", body_words=None)).text_tokens(body)
    assert "save.recent" not in removed and "options" in removed and "and" in removed


_URL_START = re.compile(r"(?:https?|ftp)://|(?<![/\w.])www\.\w", re.IGNORECASE)
_WHOLE_URL = re.compile(r"\s*(?:\S*://|www\.)\S*\s*", re.IGNORECASE)


def _expected_url_tokens(body: str) -> int:
    """One per <a href>, plus one per bare URL of the visible text, less anchor texts that are a URL."""
    root = lxml.html.fragment_fromstring(body, create_parent="div")
    anchors = root.xpath(".//a[@href != '']")
    whole = sum(1 for a in anchors if _WHOLE_URL.fullmatch(a.text_content()))
    return len(anchors) + len(_URL_START.findall(root.text_content())) - whole


def test_links_on_real_bodies() -> None:
    on = Preprocessor(TextOptions(body_words=None))
    off = Preprocessor(TextOptions(body_words=None, links=False))
    with_urls = 0
    for body in VAL_BODIES:
        expected = _expected_url_tokens(body)
        assert on.text_tokens(body).count("__url__") == expected, body
        assert "__url__" not in off.text_tokens(body)
        with_urls += expected > 0
    assert with_urls > 100
    body = next(b for b in VAL_BODIES if 'rel="nofollow">guide for higher tty resolution</a>' in b)
    tokens = on.text_tokens(body)
    at = tokens.index("__url__")
    assert tokens[at - 1:at + 5] == ["this", "__url__", "guide", "for", "higher", "tty"]
    plain = off.text_tokens(body)  # without link handling the href is dropped, the anchor text stays
    at = plain.index("guide")
    assert plain[at - 1:at + 4] == ["this", "guide", "for", "higher", "tty"]


def test_targeted_html_cases() -> None:
    html = ('<p>Run</p><pre><code>sudo apt-get install vlc\n</code></pre>'
            '<p>then <a href="http://a.com/x">this guide</a>, <a href="http://b.org">http://b.org</a>'
            ' or www.c.net/y?z=1.</p><!-- hidden --><script>var x;</script>'
            '<p>5 &lt; 6 &amp;&nbsp;the <code>ls</code>end</p>')
    assert Preprocessor(TextOptions(code="prefix")).text_tokens(html) == [
        "run", "__code__", "sudo", "apt-get", "install", "vlc", "then", "__url__", "this", "guide",
        "__url__", "or", "__url__", "5", "6", "the", "__code__", "ls", "end"]
    assert Preprocessor(TextOptions(code="remove", links=False)).text_tokens(html) == [
        "run", "then", "this", "guide", "http", "b.org", "or", "www.c.net", "y", "z", "1", "5", "6", "the",
        "end"]


def test_paragraphs_do_not_glue_words_but_inline_tags_do() -> None:
    p = Preprocessor(TextOptions())
    assert p.text_tokens("<p>one</p><p>two</p><li>three</li>four<br>five") == [
        "one", "two", "three", "four", "five"]
    assert p.text_tokens("un<b>usual</b> <kbd>Ctrl</kbd>+<kbd>Alt</kbd>") == ["unusual", "ctrl", "alt"]


@pytest.mark.parametrize(
    "broken",
    ["<p>unclosed <b>bold <pre><code>x = 1", "</div></p>stray closers</span>", "a < b and c > d",
     "<!-- only a comment -->", "", "   ", "<p>nul\x00char</p>", "<<<>>>",
     '<?xml version="1.0" encoding="utf-8"?><p>hi', "<a href='http://x.org'>", "<pre><code>unterminated",
     "&#xD800; &bogus; &#99999999;"],
)
def test_broken_html_never_raises(broken: str) -> None:
    for code in ("keep", "remove", "prefix"):
        tokens = Preprocessor(TextOptions(code=code)).text_tokens(broken)
        assert all(isinstance(t, str) and t for t in tokens)


def test_broken_html_keeps_its_text() -> None:
    p = Preprocessor(TextOptions())
    assert p.text_tokens("<p>unclosed <b>bold <pre><code>x = 1") == ["unclosed", "bold", "x", "1"]
    assert p.text_tokens("a < b and c > d") == ["a", "b", "and", "c", "d"]
    assert p.text_tokens("<p>nul\x00char</p>") == ["nul", "char"]


def test_entities_are_decoded_in_html_and_in_plain_text() -> None:
    # The real val.tsv body with "foss &amp; Oli" and an escaped <insert ...> inside <code>.
    body = next(b for b in VAL_BODIES if "foss &amp; Oli" in b)
    tokens = Preprocessor(TextOptions(body_words=None)).text_tokens(body)
    assert "amp" not in tokens and "lt" not in tokens and "gt" not in tokens
    assert tokens[tokens.index("foss") + 1] == "oli" and "insert" in tokens
    plain = Preprocessor(TextOptions(html=False, body_words=None)).text_tokens(body)
    assert "amp" not in plain and {"p", "sub", "strong", "code"} <= set(plain)


def test_semeval_plain_text_with_entities_and_urls() -> None:
    bodies = _semeval_bodies()
    assert len(bodies) > 500
    p = Preprocessor(TextOptions(body_words=None))
    with_entity = [b for b in bodies if "&#39;" in b]
    assert with_entity, "the dev file has bodies with the entity &#39;"
    for body in with_entity:
        tokens = p.text_tokens(body)
        assert "39" not in tokens and any("'" in t for t in tokens)
    for body in bodies:
        tokens = p.text_tokens(body)
        assert tokens.count("__url__") == len(_URL_START.findall(body))


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("if x<y then", ["if", "x", "y", "then"]), ("#include <stdio.h> fails", ["include", "stdio.h", "fails"]),
     ("List<String> items", ["list", "string", "items"]),
     ("I <3 Doha &amp; Dubai", ["i", "3", "doha", "dubai"]),
     ("one<br/>two<P class='x'>three", ["one", "two", "three"])],
)
def test_only_text_with_real_html_tags_is_parsed_as_html(text: str, tokens: list[str]) -> None:
    assert Preprocessor(TextOptions()).text_tokens(text) == tokens
