"""Text preprocessing: HTML, code, links, case, tokens, body cut, stop words, stems, numbers, dates, Arabic.

``Preprocessor(TextOptions(...)).tokens(question)`` is the one entry point the rest of the product uses;
the options are stored (``model_dump()``) with every model so serving cleans text the same way.
"""

from es_plugin_bridge.text.options import TextOptions
from es_plugin_bridge.text.pipeline import Preprocessor
from es_plugin_bridge.text.tokenize import CODE_TOKEN, DATE_TOKEN, MARKERS, NUM_TOKEN, URL_TOKEN, tokenize

__all__ = [
    "CODE_TOKEN",
    "DATE_TOKEN",
    "MARKERS",
    "NUM_TOKEN",
    "URL_TOKEN",
    "Preprocessor",
    "TextOptions",
    "tokenize",
]
