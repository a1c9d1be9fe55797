"""Streaming XML for readers: iterparse with bounded memory and errors that name file and line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from lxml import etree

from es_plugin_bridge.data.readers._common import COMPRESSION_ERRORS, open_binary
from es_plugin_bridge.errors import DataFormatError


def iter_elements(path: Path, tag: str) -> Iterator[etree._Element]:
    """Yield each complete ``tag`` element of an XML file (plain or gzip) in document order.

    After the caller is done with an element it is cleared and dropped from its parent together
    with its earlier siblings, so memory stays bounded by one element however large the file.
    Entities are not expanded and nothing is fetched from the network. Malformed XML raises
    DataFormatError naming the line and column.
    """
    with open_binary(path) as stream:
        events = etree.iterparse(
            stream, events=("end",), tag=tag, resolve_entities=False, no_network=True, load_dtd=False
        )
        try:
            for _, element in events:
                yield element
                element.clear(keep_tail=True)
                parent = element.getparent()
                if parent is not None:
                    while element.getprevious() is not None:
                        del parent[0]
        except etree.XMLSyntaxError as error:
            line, column = error.position if error.position else (error.lineno, 0)
            raise DataFormatError(str(path), f"{line}:{column}", f"malformed XML: {error.msg}") from None
        except COMPRESSION_ERRORS as error:
            raise DataFormatError(str(path), "end", f"cannot read compressed data ({error})") from None


def line_of(element: etree._Element) -> str:
    """The element's line, as the ``where`` of a DataFormatError."""
    return str(element.sourceline)
