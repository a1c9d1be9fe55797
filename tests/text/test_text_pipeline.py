"""Preprocessor on questions: title + cut body, stop words, stemming, and its use on the shipped samples."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import Stemmer

import es_plugin_bridge
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.text import MARKERS, Preprocessor, TextOptions
from es_plugin_bridge.text.stopwords import ARABIC, ENGLISH

SAMPLES = Path(es_plugin_bridge.__file__).parent / "samples" / "askubuntu-pairs"


def _val_questions() -> list[Question]:
    """The questions of val.tsv, title and body split at the first tag."""
    questions = []
    with open(SAMPLES / "val.tsv", encoding="utf-8") as f:
        for n, line in enumerate(f):
            for side, text in enumerate(line.rstrip("\n").split("\t")[1:]):
                cut = text.find("<")
                questions.append(Question(f"{n}.{side}", text[:cut], text[cut:]))
    return questions


VAL = _val_questions()


def test_tokens_are_title_then_body_cut_at_100_words() -> None:
    p = Preprocessor(TextOptions())
    long = 0
    for q in VAL:
        body = p.text_tokens(q.body)
        tokens = p.tokens(q)
        assert tokens == p.text_tokens(q.title) + body[:100]
        assert tokens[len(tokens) - min(len(body), 100):] == body[:100]
        long += len(body) > 100
    assert long > 200
    q = next(q for q in VAL if len(p.text_tokens(q.body)) > 100)
    assert len(p.body_tokens(q)) == 100 and p.title_tokens(q) == p.text_tokens(q.title)


def test_cut_options() -> None:
    q = Question("x", "How do I count?", "<p>" + " ".join(f"w{i}" for i in range(250)) + "</p>")
    assert Preprocessor(TextOptions()).body_tokens(q) == [f"w{i}" for i in range(100)]
    assert Preprocessor(TextOptions(body_words=7)).tokens(q) == ["how", "do", "i", "count"] + [
        f"w{i}" for i in range(7)]
    assert len(Preprocessor(TextOptions(body_words=None)).body_tokens(q)) == 250
    assert Preprocessor(TextOptions(body_words=0)).tokens(q) == ["how", "do", "i", "count"]
    assert Preprocessor(TextOptions(use_body=False)).tokens(q) == ["how", "do", "i", "count"]
    assert Preprocessor(TextOptions(use_body=False)).body_tokens(q) == []


def test_cut_counts_tokens_after_stop_words_and_markers() -> None:
    body = "<p>" + "the cat and a dog " * 60 + '<a href="http://x.org">x</a></p>'
    q = Question("x", "", body)
    tokens = Preprocessor(TextOptions(stopwords=True, body_words=100)).body_tokens(q)
    assert tokens == ["cat", "dog"] * 50
    tokens = Preprocessor(TextOptions(stopwords=True, body_words=None)).body_tokens(q)
    assert tokens[-2:] == ["__url__", "x"] and len(tokens) == 122


def test_stop_words() -> None:
    p = Preprocessor(TextOptions(stopwords=True))
    assert p.text_tokens("How do I install the drivers? I don't have them") == ["install", "drivers"]
    no_case = Preprocessor(TextOptions(stopwords=True, lowercase=False))
    assert no_case.text_tokens("How Do I Install") == ["Install"]
    assert "the" in Preprocessor(TextOptions()).text_tokens("the drivers")
    # Arabic stop words only with arabic=True, and in any spelling (إلى / الى / الي).
    text = "ذهبت إلى البنك في الدوحة"
    arabic = Preprocessor(TextOptions(stopwords=True, arabic=True)).text_tokens(text)
    assert arabic == ["ذهبت", "البنك", "الدوحه"]
    assert p.text_tokens(text) == text.split()
    assert len(ENGLISH) == 179 and all(w == w.lower() for w in ENGLISH) and len(ARABIC) > 50


def test_stemming_is_snowball_and_leaves_markers() -> None:
    p = Preprocessor(TextOptions(stem=True, code="prefix", numbers=True))
    english = Stemmer.Stemmer("english")
    words = ["installing", "installed", "installs", "drivers", "partitions", "mounting", "ubuntu's"]
    assert p.text_tokens(" ".join(words)) == english.stemWords(words)
    assert p.text_tokens("installing installed installs") == ["instal"] * 3
    assert p.text_tokens('see <a href="http://x.org">this</a> <code>ls</code> 42') == [
        "see", "__url__", "this", "__code__", "ls", "__num__"]
    for q in VAL[:200]:
        stemmed = p.tokens(q)
        plain = Preprocessor(TextOptions(code="prefix", numbers=True)).tokens(q)
        assert stemmed == [t if t in MARKERS else english.stemWord(t) for t in plain]


def test_arabic_stemming_only_with_arabic() -> None:
    word = "\u0627\u0644\u0645\u0643\u062a\u0628\u0627\u062a"  # المكتبات
    arabic_stem = Stemmer.Stemmer("arabic").stemWord(word)
    assert arabic_stem != word
    assert Preprocessor(TextOptions(stem=True, arabic=True)).text_tokens(f"{word} libraries") == [
        arabic_stem, "librari"]
    assert Preprocessor(TextOptions(stem=True)).text_tokens(word) == [word]


def test_every_option_on_every_real_question() -> None:
    combos = [TextOptions(), TextOptions(code="remove", links=False, lowercase=False),
              TextOptions(code="prefix", stopwords=True, stem=True, numbers=True, dates=True, arabic=True),
              TextOptions(html=False, body_words=None)]
    for opts in combos:
        p = Preprocessor(opts)
        for q in VAL[::3]:
            tokens = p.tokens(q)
            assert tokens and all(tokens)
            assert all(" " not in t and "<" not in t for t in tokens)
            if opts.lowercase:
                assert all(t == t.lower() for t in tokens)


def test_pickle_and_threads_give_the_same_tokens() -> None:
    p = Preprocessor(TextOptions(stem=True, stopwords=True))
    copy = pickle.loads(pickle.dumps(p))
    assert copy.options == p.options
    expected = [p.tokens(q) for q in VAL[:300]]
    assert [copy.tokens(q) for q in VAL[:300]] == expected
    fresh = Preprocessor(TextOptions(stem=True, stopwords=True))
    results: dict[int, list[list[str]]] = {}

    def work(k: int) -> None:
        results[k] = [fresh.tokens(q) for q in VAL[:300]]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results[k] == expected for k in range(4))
