"""The vectors file of ``esrerank embed``: each question's ``/v1/encode`` answer, written once and indexed
many times (``es index --vectors``) without the sidecar.

Format (version 1): gzip'd NDJSON, UTF-8. The first line is the header::

    {"format": "esrerank.vectors", "version": 1, "model": "bow-cnn:model", "model_type": "bow-cnn",
     "manifest_sha256": "<sha256 of the model directory's manifest.json>", "dimension": 64, "count": 1000}

then ``count`` lines, one a question, ``{"id": ..., "text_sha256": ..., "vector": [...], "terms": {...}}``
(``vector`` and ``terms`` exactly as ``/v1/encode`` answers them for the question's ``rerank_text``;
``text_sha256``: the first 16 hex digits of that text's sha256, so a question whose text changed since
is not stored with an old vector), and last ``{"end": true, "count": N}``.

Why a trailer and an atomic rename: a file is complete only when its last line is there with the
header's count, and :class:`VectorsWriter` writes under a temporary name (``.NAME.partial``) renamed
only after that line; a killed ``embed`` leaves no file at the name asked for, and a cut copy is refused.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text.sidecar_text import rerank_text

FORMAT = "esrerank.vectors"
VERSION = 1


def text_digest(question: Question) -> str:
    """The first 16 hex digits of the sha256 of the string embedded for ``question``."""
    return hashlib.sha256(rerank_text(question).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Header:
    """Which model wrote the file, its vectors' dimension and how many questions it holds."""

    model: str
    model_type: str
    manifest_sha256: str
    dimension: int
    count: int

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "model": self.model, "model_type": self.model_type,
                "manifest_sha256": self.manifest_sha256, "dimension": self.dimension, "count": self.count}


class VectorsWriter:
    """Writes a vectors file atomically: records go to a temporary body, and :meth:`commit` puts the header
    (whose count is known only then) in front and renames; :meth:`discard` (or an exception in the
    ``with`` block) leaves nothing at ``path``."""

    def __init__(self, path: Path, model: str, model_type: str, manifest_sha256: str, dimension: int) -> None:
        self.path = Path(path)
        self._identity = (model, model_type, manifest_sha256, dimension)
        self._body_path = self.path.with_name(f".{self.path.name}.body.partial")
        self._final_tmp = self.path.with_name(f".{self.path.name}.partial")
        # closed by commit or discard (the writer is a context manager)
        self._body: IO[str] | None = gzip.open(  # noqa: SIM115
            self._body_path, "wt", encoding="utf-8", compresslevel=6)
        self.count = 0

    def write(self, question: Question, embedding: Mapping[str, Any]) -> None:
        """One question's ``/v1/encode`` item (its ``vector`` and ``terms``)."""
        assert self._body is not None, "the writer is closed"
        record = {"id": question.id, "text_sha256": text_digest(question),
                  "vector": embedding["vector"], "terms": embedding["terms"]}
        self._body.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.count += 1

    def commit(self) -> Header:
        """Close the file, header first, trailer last, and rename it into place; its header."""
        assert self._body is not None, "the writer is closed"
        self._body.write(json.dumps({"end": True, "count": self.count}) + "\n")
        self._body.close()
        self._body = None
        header = Header(*self._identity, count=self.count)
        # gzip members concatenate: one small member for the header, then the body's bytes as written.
        with open(self._final_tmp, "wb") as out:
            with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as head:
                head.write((json.dumps(header.as_dict()) + "\n").encode("utf-8"))
            with open(self._body_path, "rb") as body:
                shutil.copyfileobj(body, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        os.replace(self._final_tmp, self.path)
        self._body_path.unlink(missing_ok=True)
        return header

    def discard(self) -> None:
        if self._body is not None:
            self._body.close()
            self._body = None
        for path in (self._body_path, self._final_tmp):
            path.unlink(missing_ok=True)

    def __enter__(self) -> VectorsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._body is not None:  # not committed: an error or an interrupt
            self.discard()


_Record = tuple[str, np.ndarray, dict[str, float]]  # (text_sha256, vector, terms) of one question


class MissingVector(LookupError):
    """A question of the data is not in the vectors file, or its text changed since it was embedded."""


class UnstorableRecord(MissingVector):
    """A record of the file whose vector or terms no index can store as they are (a corrupted file): the
    question fails alone, named, rather than being stored without its vector or its BOW features."""


def unstorable(id_: str, vector: np.ndarray, terms: Mapping[str, Any], cosine: bool) -> str | None:
    """Why a record cannot be stored whole, or None: a non-finite component, an all-zero vector under
    ``cosine`` (the engines refuse a zero-magnitude vector there; ``mappings.document`` would drop it), a
    term weight that is not a finite number (``bow_features`` would drop a NaN one)."""
    if not np.isfinite(vector).all():
        return f"the vector of {id_} has a non-finite component ({vector[~np.isfinite(vector)][0]})"
    if cosine and not vector.any():
        return f"the vector of {id_} is all zeros (a cosine index cannot store it)"
    for term, weight in terms.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not np.isfinite(weight):
            return f"the weight of term {term!r} of {id_} is {weight!r}, not a finite number"
    return None


class Vectors:
    """A vectors file read whole: each id's vector (float32, as the encoder computed it) and terms."""

    def __init__(self, path: Path, header: Header, records: dict[str, _Record]) -> None:
        self.path, self.header, self._records = Path(path), header, records

    def __len__(self) -> int:
        return len(self._records)

    def embed(self, questions: Sequence[Question], cosine: bool = True) -> list[dict[str, Any]]:
        """``SidecarClient.embed`` from the file: one ``{"vector", "terms"}`` per question, in order;
        MissingVector naming the first question it lacks or whose record cannot be stored
        (:func:`unstorable`; ``cosine``: the index's similarity is cosine); the bulk indexer then fails
        that one alone."""
        out = []
        for q in questions:
            found = self._records.get(q.id)
            if found is None:
                raise MissingVector(f"{q.id} is not in {self.path.name} (embed it again with esrerank embed)")
            digest, vector, terms = found
            if digest != text_digest(q):
                raise MissingVector(f"the text of {q.id} differs from the one {self.path.name} embedded "
                                    "(embed it again with esrerank embed)")
            why = unstorable(q.id, vector, terms, cosine)
            if why is not None:
                raise UnstorableRecord(f"{why} in {self.path.name}: not stored (embed it again with "
                                       "esrerank embed)")
            out.append({"vector": vector.astype(float).tolist(), "terms": terms})
        return out

    def check_model(self, model_type: str, dimension: int | None, manifest_sha256: str | None,
                    index: str) -> None:
        """UserError in one line when the file was made by another model than the index's."""
        head = self.header
        if manifest_sha256 is not None and head.manifest_sha256 != manifest_sha256:
            raise UserError(f"{self.path} was embedded by model {head.model} (manifest sha256 "
                            f"{head.manifest_sha256[:12]}…), not by index {index}'s model (manifest "
                            f"{manifest_sha256[:12]}…): embed with the index's model directory")
        if head.model_type != model_type or head.dimension != dimension:
            raise UserError(f"{self.path} holds {head.model_type} vectors of dimension {head.dimension}; "
                            f"index {index} holds {model_type} vectors of dimension {dimension}")


def read_vectors(path: Path) -> Vectors:
    """Read and check a vectors file; UserError in one line when it is not one, is of another version, or
    is incomplete (no trailer, or fewer records than its header says)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"vectors file not found: {path}")
    try:
        return _read(path)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not a readable vectors file ({type(exc).__name__}: {exc}); "
                        "it may be cut short: write it again with esrerank embed") from None


def _read(path: Path) -> Vectors:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        rows = _json_lines(path, lines)
        header = _header(path, next(rows, None))
        records: dict[str, _Record] = {}
        for row in rows:
            if row.get("end") is True:
                if row.get("count") != header.count or len(records) != header.count:
                    raise UserError(f"{path}: holds {len(records)} questions, its header says {header.count}")
                return Vectors(path, header, records)
            try:
                vector = np.asarray(row["vector"], dtype=np.float32)
                records[str(row["id"])] = (str(row["text_sha256"]), vector, dict(row["terms"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise UserError(f"{path}: a record lacks or mangles {exc} (id {row.get('id')!r})") from None
            if vector.shape != (header.dimension,):
                raise UserError(f"{path}: the vector of {row['id']!r} has {vector.size} values, "
                                f"not {header.dimension}")
    raise UserError(f"{path}: incomplete (it ends after {len(records)} of {header.count} questions, before "
                    "its last line): an embed that did not finish? write it again with esrerank embed")


def _json_lines(path: Path, lines: IO[str]) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}: line {number} is not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise UserError(f"{path}: line {number} is not a JSON object")
        yield row


def _header(path: Path, row: dict[str, Any] | None) -> Header:
    if row is None or row.get("format") != FORMAT:
        raise UserError(f"{path}: not a vectors file of esrerank embed (no {FORMAT!r} header)")
    if row.get("version") != VERSION:
        raise UserError(f"{path}: vectors file version {row.get('version')!r}; this esrerank reads version "
                        f"{VERSION}")
    try:
        return Header(str(row["model"]), str(row["model_type"]), str(row["manifest_sha256"]),
                      int(row["dimension"]), int(row["count"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{path}: its header lacks or mangles {exc}") from None
