"""Arabic orthographic normalisation: the same word spelt with or without its optional marks is one token.

Forum writers use diacritics, elongation and hamza/alef variants inconsistently, so the attentive
Siamese LSTM paper removed diacritics and stretching and unified letter variants. Here:

* removed: the harakat and tanwin (U+064B-U+065F), the superscript alef (U+0670), Quranic annotation
  marks (U+0610-U+061A, U+06D6-U+06ED) and the tatweel (U+0640, the stretching character);
* alef with hamza above/below, alef with madda and alef wasla (أ إ آ ٱ) become bare alef (ا);
* alef maqsura (ى) and Farsi yeh (ی) become yeh (ي);
* teh marbuta (ة) becomes heh (ه).
"""

from __future__ import annotations

_REMOVE = [*range(0x064B, 0x0660), 0x0670, *range(0x0610, 0x061B), *range(0x06D6, 0x06EE), 0x0640]
_TABLE: dict[int, str | None] = {cp: None for cp in _REMOVE}
_TABLE.update({ord(c): "\u0627" for c in "\u0623\u0625\u0622\u0671"})
_TABLE.update({ord("\u0649"): "\u064a", ord("\u06cc"): "\u064a", ord("\u0629"): "\u0647"})


def normalize_arabic(text: str) -> str:
    """Apply the normalisation above; text in other scripts is unchanged."""
    return text.translate(_TABLE)


def is_arabic(token: str) -> bool:
    """Whether a token starts with a letter of the Arabic block (used to pick the Arabic stemmer)."""
    return "\u0600" <= token[0] <= "\u06ff"
