"""Cohere's ``truncate`` on the product's encoders: what the model would cut of a text, and START's cut.

The model reads a text as the product's pipeline makes it (``serving.inputs``): the title's tokens (at
most ``max_title`` for the papers' encoders), the body's tokens (at most ``body_words``, and
``max_body`` for the papers' encoders) and, for a transformer, at most its tokenizer's ``max_length``
sub-words. What goes past a cap is dropped at the end: Cohere's ``END``, and what ``/v1/encode`` has
always done. ``NONE`` refuses a text that :func:`cut_reason` finds cut; ``START`` (:func:`keep_end`)
drops whole words from the start of the text until nothing is cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from es_plugin_bridge.data.types import Question


def cut_reason(inputs: Any, question: Question) -> str | None:
    """Why the model's caps cut ``question`` (which part, how long, the cap), or None when it fits.

    ``inputs`` is a single-text input adapter (``VocabularyInputs`` or ``SubwordInputs``).
    """
    pre = inputs.preprocessor
    tokenizer = getattr(inputs, "tokenizer", None)  # a transformer: its vector reads sub-words
    title = pre.title_tokens(question)
    if tokenizer is None and len(title) > inputs.max_title:
        return f"its title is {len(title)} tokens and the model reads {inputs.max_title}"
    if pre.options.use_body and question.body:
        body = len(pre.text_tokens(question.body))
        caps = [pre.options.body_words] + ([inputs.max_body] if tokenizer is None else [])
        cap = min(c for c in caps if c is not None) if any(c is not None for c in caps) else None
        if cap is not None and body > cap:
            return f"its body is {body} tokens and the model reads {cap}"
    if tokenizer is not None:
        encoded = tokenizer.tokenizer.encode(" ".join(pre.tokens(question)))
        if encoded.overflowing:
            total = len(encoded.ids) + sum(len(o.ids) for o in encoded.overflowing)
            return f"it is about {total} sub-words and the model reads {tokenizer.max_length}"
    return None


def tokens_read(encoded: Sequence[Sequence[int]]) -> int:
    """How many tokens the model reads of one encoded text: its sub-words for a transformer (the third
    id list), else its title and body ids (after the caps)."""
    return len(encoded[2]) if len(encoded) > 2 else sum(len(part) for part in encoded)


def keep_end(text: str, fits: Callable[[str], bool]) -> str:
    """``text`` without as few leading whole words as make it ``fits`` (itself when it fits already).

    Dropping words never lengthens what the model reads, so the fewest are found by bisection; a text
    whose last word alone does not fit keeps that word (the model then cuts it at the end).
    """
    if fits(text):
        return text
    words = text.split()
    low, high = 1, len(words) - 1  # the answer drops between low and high words
    while low < high:
        mid = (low + high) // 2
        if fits(" ".join(words[mid:])):
            high = mid
        else:
            low = mid + 1
    return " ".join(words[max(high, 0):]) if words else text


__all__ = ["cut_reason", "keep_end", "tokens_read"]
