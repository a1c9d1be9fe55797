"""``esrerank embed``: every question's vector and terms computed once, in process, into a vectors file
(``elastic/vectors_file.py``) that ``es index --vectors`` stores on any number of indexes.

In process with the sidecar's own code (``serving/service.py``'s ``encode_json``, the ``/v1/encode``
answer, for each question's ``rerank_text``), so no server is needed and any machine can do it, a GPU
one included (``--device``, as ``esrerank serve``). A text the sidecar would refuse (blank, or over its
length limit) is left out and reported with the sidecar's reason; ``es index --vectors`` then fails that
question alone.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.vectors_file import Header, VectorsWriter
from es_plugin_bridge.text.sidecar_text import rerank_text

if TYPE_CHECKING:  # the serving stack loads when embed runs
    from es_plugin_bridge.serving.service import Service

#: Texts per in-process encode call: the sidecar's ``--max-documents`` default is 1,000 a request.
DEFAULT_BATCH_SIZE = 256


@dataclass
class EmbedReport:
    """What ``embed`` wrote: the file's header, and each question left out with the reason."""

    header: Header | None = None
    refused: list[tuple[str, str]] = field(default_factory=list)

    def lines(self, path: Path) -> list[str]:
        head = self.header
        out = [] if head is None else [f"wrote {head.count} questions ({head.model}, dimension "
                                       f"{head.dimension}, manifest {head.manifest_sha256[:12]}…) to {path}"]
        out += [f"not embedded {id_}: {reason}" for id_, reason in self.refused]
        return out


def embed_to_file(questions: Sequence[Question], model_dir: Path, out: Path, *,
                  batch_size: int = DEFAULT_BATCH_SIZE, device: str = "auto", threads: int | None = None,
                  progress: bool = True) -> EmbedReport:
    """Write ``questions``' ``/v1/encode`` answers to ``out`` (atomically: nothing at ``out`` unless the
    whole file was written); UserError when the model directory is refused or has no vectors."""
    from es_plugin_bridge.core.manifest import manifest_digest
    from es_plugin_bridge.serving.model_dir import ModelDirectory
    from es_plugin_bridge.serving.service import Service

    model = ModelDirectory.load(model_dir, threads=threads, device=device)  # type: ignore[arg-type]
    service = Service(model)
    service._check_vectors()  # a pairwise model: its one-line reason, before any file is made
    report = EmbedReport()
    writer = VectorsWriter(out, service.name, model.model_type, manifest_digest(model.path), model.dimension)
    with writer, tqdm(total=len(questions), desc=f"embedding with {service.name}", unit="question",
                      file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
                      disable=None if progress else True) as bar:
        for start in range(0, len(questions), batch_size):
            batch = questions[start:start + batch_size]
            for question, embedding in zip(*_encode(service, batch, report), strict=True):
                writer.write(question, embedding)
            bar.update(len(batch))
        report.header = writer.commit()
    return report


def _encode(service: Service, batch: Sequence[Question],
            report: EmbedReport) -> tuple[list[Question], list[dict[str, Any]]]:
    """The batch's questions the sidecar takes and their embeddings; the others booked as refused with the
    sidecar's own reason (``serving/schemas.py``'s ``check_text``)."""
    from es_plugin_bridge.serving.schemas import EncodeRequest, check_text

    kept, texts = [], []
    for question in batch:
        text = rerank_text(question)
        try:
            check_text(text, service.model.preprocessor)  # as the sidecar serving this model would
        except ValueError as exc:
            report.refused.append((question.id, str(exc)))
            continue
        kept.append(question)
        texts.append(text)
    if not texts:
        return [], []
    answer = service.encode_json(EncodeRequest(texts=texts))
    return kept, [{"vector": e.vector, "terms": e.terms} for e in answer.embeddings]
