"""``es index --dry-run --out FILE``: the ``_bulk`` NDJSON the product would send, written with no
cluster and no sidecar, for ``curl --data-binary @FILE``, Kibana, or any client.

Each question is an ``index`` action (``_index``, ``_id``) and its source: ``title`` and ``body`` as
given, ``text`` (the product's tokens for the first stage) and ``rerank_text`` (what Elasticsearch sends
the sidecar, ``${`` written ``&#36;{``). The vector and BOW features are left to the index's ingest
pipeline (``es setup`` makes it the index's ``default_pipeline`` where the licence allows).

No ``${`` appears anywhere in the file: the ``$`` of a ``${`` inside a JSON string is written as the
JSON escape ``\\u0024`` (the stored title and body are unchanged: JSON parsing restores ``$``), so a
file that passes through any ``${…}``-substituting tool arrives intact. The file is written to a
temporary name and renamed when complete, so a failed run leaves no partial file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.mappings import document


def ndjson_line(obj: object) -> str:
    """One NDJSON line; ``${`` only occurs inside JSON strings, where ``\\u0024{`` means the same."""
    return json.dumps(obj, ensure_ascii=False).replace("${", "\\u0024{") + "\n"


def write_bulk_file(
    path: Path, index: str, questions: Iterable[Question], tokens: Callable[[Question], list[str]]
) -> int:
    """Write the bulk body of ``questions`` for ``index`` to ``path``; the number of questions written."""
    path = Path(path)
    count = 0
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            for q in questions:
                out.write(ndjson_line({"index": {"_index": index, "_id": q.id}}))
                out.write(ndjson_line(document(q, tokens(q))))
                count += 1
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return count
