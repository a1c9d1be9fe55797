"""A text cut to what the model reads before it is preprocessed, so a long text costs what a short one does.

The model reads a few hundred tokens of a question at most (``serving.truncation``: ``max_title`` and
``max_body`` vocabulary ids, the body's ``body_words``, a transformer's ``max_length`` sub-words), but
preprocessing (HTML parsing, tokenising, stemming) ran over the whole text first: 50 texts of 99,999
characters took 23.8 s to rerank (issue 48, item 3). Here each part is preprocessed from a prefix:

- a part is needed up to ``need`` tokens: the most any reader of it takes (vocabulary ids; for a
  transformer twice its sub-word cap, since a token is at least one sub-word and rarely none; a body
  never past ``body_words``), plus :data:`TAIL_MARGIN`;
- the prefix is the first ``need`` × :data:`CHARS_PER_TOKEN` characters, cut at a space outside any
  HTML tag. If it gives ``need`` tokens, those are the text's own first tokens, because every step of
  the pipeline is local: only the tokens next to the cut can differ from the whole text's (a word or a
  date split there, an unclosed tag), and the margin keeps those out of what the model reads. Else the
  prefix grows fourfold until it gives them or is the whole text (markup or removed code can hold
  many characters per token), so the worst case costs about 4/3 of preprocessing the whole text once.

So what the model reads, and every vector and score, is what the whole text gives (checked on real
AskUbuntu questions with HTML and long code blocks, ``tests/serving/test_text_cut.py``), while a
99,999-character text is preprocessed from its first few thousand characters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from es_plugin_bridge.data.types import Question

#: Characters of raw text tried per token needed, at first: English forum text averages about 6 per
#: token, HTML markup and code more; a prefix that falls short grows fourfold.
CHARS_PER_TOKEN = 24
#: Tokens taken beyond what the model reads, so that the ones next to the cut are never read.
TAIL_MARGIN = 16


def needs(inputs: Any) -> tuple[int, int | None] | None:
    """Tokens needed of a question's title and of its body (None: the body is not read), or None when
    the adapter is not one this module knows (nothing is cut then).

    ``inputs`` is a model's input adapter (``VocabularyInputs``, ``SubwordInputs``, ``PairInputs``).
    """
    inputs = getattr(inputs, "sides", inputs)  # a pair model's sides read one question each
    pre = getattr(inputs, "preprocessor", None)
    if pre is None or not hasattr(inputs, "max_title") or not hasattr(inputs, "max_body"):
        return None
    tokenizer = getattr(inputs, "tokenizer", None)
    subwords = 2 * tokenizer.max_length if tokenizer is not None else 0
    title = max(inputs.max_title, subwords)
    body = max(inputs.max_body, subwords)
    if pre.options.body_words is not None:
        body = min(body, pre.options.body_words)
    return title + TAIL_MARGIN, (body + TAIL_MARGIN) if pre.options.use_body else None


def _cut_at(text: str, limit: int) -> int:
    """A position at most ``limit`` at a space outside any HTML tag (``limit`` itself if none)."""
    pos = limit
    while pos > limit // 2:
        space = max(text.rfind(" ", 0, pos), text.rfind("\n", 0, pos))
        if space <= limit // 2:
            break
        if text.rfind("<", 0, space) <= text.rfind(">", 0, space):  # not inside a tag
            return space
        pos = text.rfind("<", 0, space)
    return limit


def read_part(text: str, need: int, tokens: Callable[[str], list[str]]) -> str:
    """The shortest prefix of ``text`` tried that gives at least ``need`` tokens, or ``text`` itself."""
    limit = need * CHARS_PER_TOKEN
    while limit < len(text):
        prefix = text[: _cut_at(text, limit)]  # a word cut there: the margin keeps it out of what is read
        if len(tokens(prefix)) >= need:
            return prefix
        limit *= 4
    return text


def read_question(inputs: Any, question: Question) -> Question:
    """``question`` with its title and body cut to what the model reads (:func:`read_part`)."""
    need = needs(inputs)
    if need is None:
        return question
    pre = getattr(inputs, "sides", inputs).preprocessor
    title, body = question.title, question.body
    if len(title) > need[0] * CHARS_PER_TOKEN:
        title = read_part(title, need[0], pre.text_tokens)
    if need[1] is not None and len(body) > need[1] * CHARS_PER_TOKEN:
        body = read_part(body, need[1], pre.text_tokens)
    if title is question.title and body is question.body:
        return question
    return Question(question.id, title, body)


__all__ = ["CHARS_PER_TOKEN", "TAIL_MARGIN", "needs", "read_part", "read_question"]
