"""The encoder as an ONNX graph, checked against torch on several input shapes.

The graph maps (title_ids, title_mask, body_ids, body_mask) to the neural vector [B, D]; the BOW
path needs no graph (it is a lookup in the exported weights). Export is by tracing
(``torch.onnx.export(dynamo=False, opset_version=17)``): Python control flow on shapes is frozen
at trace time, so a graph with dynamic sequence lengths is only kept when onnxruntime matches
torch on every probe shape (caps, a batch's own widths, title longer than body, a single
question); otherwise the graph is re-exported at the fixed padded lengths max_title / max_body,
which every model type supports. The batch axis is dynamic in both.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models import QuestionSimilarityModel
from es_plugin_bridge.training.featurize import Featurizer

OPSET = 17
INPUTS = ("title_ids", "title_mask", "body_ids", "body_mask")
OUTPUT = "neural"


class _Encoder(torch.nn.Module):
    """Flat-tensor wrapper: the four inputs → the neural vector."""

    def __init__(self, model: QuestionSimilarityModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, title_ids, title_mask, body_ids, body_mask):  # noqa: ANN001, ANN201
        return self.model.encode(title_ids, title_mask, body_ids, body_mask)["neural"]


@dataclass
class Probe:
    """One verification batch: its name, the questions and whether to pad to the caps."""

    name: str
    questions: list[Question]
    fixed: bool


def probes(questions: list[Question]) -> list[Probe]:
    """The shapes a dynamic-length graph must get right; the first is the recorded comparison."""
    titles = [Question(f"{q.id}#title-only", q.title, "") for q in questions[:16]]
    return [
        Probe("caps", questions, True),
        Probe("natural", questions, False),
        Probe("titles", titles, False),
        Probe("single", questions[:1], False),
    ]


def _batch(featurizer: Featurizer, questions: list[Question], fixed: bool) -> dict[str, torch.Tensor]:
    batch = featurizer.batch(questions)
    if not fixed:
        return batch
    caps = {"title": featurizer.max_title, "body": featurizer.max_body}
    return {
        key: torch.nn.functional.pad(value, (0, caps[key.split("_")[0]] - value.shape[1]))
        for key, value in batch.items()
    }


def export_encoder(
    model: QuestionSimilarityModel,
    featurizer: Featurizer,
    questions: list[Question],
    path: Path,
    dynamic: bool,
) -> None:
    """Trace the encoder on a real batch at the caps and write ``path`` (checked by onnx.checker)."""
    example = _batch(featurizer, questions, fixed=True)
    axes: dict[str, dict[int, str]] = {OUTPUT: {0: "batch"}}
    for name in INPUTS:
        axes[name] = {0: "batch", 1: f"{name.split('_')[0]}_length"} if dynamic else {0: "batch"}
    _trace(_Encoder(model), example, INPUTS, axes, path)


def _trace(module: torch.nn.Module, example: dict[str, torch.Tensor], inputs: tuple[str, ...],
           axes: dict[str, dict[int, str]], path: Path) -> None:
    """Trace ``module`` on the ``example`` batch into ``path`` (TorchScript exporter), checked by onnx."""
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about frozen shapes: the probes decide
        torch.onnx.export(
            module.eval(),
            tuple(example[name] for name in inputs),
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=list(inputs),
            output_names=[OUTPUT],
            dynamic_axes=axes,
        )
    onnx.checker.check_model(str(path))


def _session(path: Path, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def compare(
    model: QuestionSimilarityModel, featurizer: Featurizer, path: Path, checks: list[Probe], threads: int = 1,
    measure: str = "abs",
) -> dict[str, float]:
    """The :func:`distance` of onnxruntime's neural vectors to torch's per probe (inf when onnxruntime fails).

    The torch side is what ``NeuralScorer`` computes: each batch at its own natural widths.
    """
    session = _session(path, threads)
    diffs: dict[str, float] = {}
    for probe in checks:
        with torch.no_grad():
            expected = model.encode(**featurizer.batch(probe.questions))["neural"].numpy()
        feed = {k: v.numpy() for k, v in _batch(featurizer, probe.questions, probe.fixed).items()}
        try:
            got = session.run([OUTPUT], feed)[0]
        except Exception:  # onnxruntime raises its own types for shapes a frozen graph cannot take
            diffs[probe.name] = float("inf")
            continue
        diffs[probe.name] = distance(got, expected, measure)
    return diffs


def distance(got: np.ndarray, expected: np.ndarray, measure: str = "abs") -> float:
    """``abs``: max |got − expected| (export error); ``cosine``: max 1 − cos(got, expected) over rows.

    The cosine measure judges a quantised graph by what its vectors are used for (cosines), since its
    per-component error is spread over every dimension. inf when the shapes differ.
    """
    if got.shape != expected.shape:
        return float("inf")
    if measure == "abs":
        return float(np.abs(got - expected).max())
    norms = np.linalg.norm(got, axis=-1) * np.linalg.norm(expected, axis=-1)
    cos = (got * expected).sum(-1) / np.maximum(norms, 1e-12)
    return float((1.0 - cos).max())


def export_verified(
    model: QuestionSimilarityModel,
    featurizer: Featurizer,
    questions: list[Question],
    path: Path,
    tolerance: float,
) -> tuple[bool, dict[str, float]]:
    """Export with dynamic lengths if every probe matches, else at fixed lengths; abort if that fails too.

    Returns (dynamic_length, max abs diff per probe of the kept graph).
    """
    checks = probes(questions)
    export_encoder(model, featurizer, questions, path, dynamic=True)
    diffs = compare(model, featurizer, path, checks)
    if all(d <= tolerance for d in diffs.values()):
        return True, diffs
    export_encoder(model, featurizer, questions, path, dynamic=False)
    fixed = [Probe(p.name, p.questions, True) for p in checks]
    diffs = compare(model, featurizer, path, fixed)
    worst = max(diffs, key=diffs.__getitem__)
    if diffs[worst] > tolerance:
        raise UserError(
            f"the ONNX encoder does not match torch: max |onnxruntime − torch| = {diffs[worst]:.3g} "
            f"> {tolerance:g} on the {worst!r} batch; nothing was written"
        )
    return False, diffs


# -- the transformer type: (input_ids, attention_mask) → unit vector ---------------------------------

SUBWORD_INPUTS = ("input_ids", "attention_mask")


class _SubwordEncoder(torch.nn.Module):
    """The transformer's pooled, normalised vector from its two inputs."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):  # noqa: ANN001, ANN201
        return self.model.encode(input_ids, attention_mask)["neural"]


def subword_probes(questions: list[Question]) -> list[Probe]:
    """Batches of natural widths the dynamic graph must match torch on (padding differs per batch)."""
    titles = [Question(f"{q.id}#title-only", q.title, "") for q in questions[:16]]
    return [Probe("natural", questions, False), Probe("titles", titles, False),
            Probe("single", questions[:1], False)]


def compare_subword(model: torch.nn.Module, featurizer: Featurizer, path: Path, checks: list[Probe],
                    threads: int = 1, measure: str = "abs") -> dict[str, float]:
    """The :func:`distance` of the vectors to torch's per probe, both fed the featurizer's padded batch."""
    session = _session(path, threads)
    diffs: dict[str, float] = {}
    for probe in checks:
        batch = featurizer.batch(probe.questions)
        with torch.no_grad():
            expected = model.encode(**batch)["neural"].numpy()
        got = session.run([OUTPUT], {k: v.numpy() for k, v in batch.items()})[0]
        diffs[probe.name] = distance(got, expected, measure)
    return diffs


def export_subword_verified(
    model: torch.nn.Module, featurizer: Featurizer, questions: list[Question], path: Path, tolerance: float
) -> dict[str, float]:
    """Export the transformer with dynamic batch and length; UserError when onnxruntime differs from torch."""
    example = featurizer.batch(questions[:8])
    axes = {name: {0: "batch", 1: "length"} for name in SUBWORD_INPUTS}
    axes[OUTPUT] = {0: "batch"}
    _trace(_SubwordEncoder(model), example, SUBWORD_INPUTS, axes, path)
    diffs = compare_subword(model, featurizer, path, subword_probes(questions))
    worst = max(diffs, key=diffs.__getitem__)
    if not diffs[worst] <= tolerance:
        raise UserError(
            f"the ONNX encoder does not match torch: max |onnxruntime − torch| = {diffs[worst]:.3g} "
            f"> {tolerance:g} on the {worst!r} batch; nothing was written"
        )
    return diffs


def quantize_int8(path: Path) -> None:
    """Replace the graph at ``path`` by its dynamic int8 quantisation (int8 weights, activations per run)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = path.with_name(f".{path.name}.int8")
    # Per-channel weights of the MatMuls only: on MiniLM this keeps the vectors' cosine to fp32 at
    # 0.995 on average (0.96 per-tensor over every operator) for the same speed.
    logging.disable(logging.WARNING)  # its advice to pre-process is logged on the root logger
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantize_dynamic(str(path), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul"])
    finally:
        logging.disable(logging.NOTSET)
    tmp.replace(path)
