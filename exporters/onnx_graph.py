"""A model's encoder as an ONNX graph, checked against torch on real batches.

The family (``training.families``) says what to trace: its flat-tensor wrapper, the batch, the dynamic
axes, the probe batches and, in order, the graph lengths to try. Export is by tracing
(``torch.onnx.export(dynamo=False, opset_version=17)``): Python control flow on shapes is frozen at
trace time, so a graph is only kept when onnxruntime matches torch on every probe; a family whose
encoders may freeze shapes (the papers') falls back to a graph at the fixed padded caps. The batch axis
is always dynamic. The BOW path needs no graph (it is a lookup in the exported weights).
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

from es_plugin_bridge.core.model_config import ENCODER_OUTPUT
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.training.families import ModelFamily, Probe
from es_plugin_bridge.training.families.base import fixed
from es_plugin_bridge.training.featurize import Featurizer
from exporters.row_quantize import per_row_activations

OPSET = 17
#: ``verification.quantization`` of an int8 export: onnxruntime's dynamic quantisation (int8 weights per
#: channel; activation scales computed per run, hence ``batch_check``'s one run per text).
QUANTIZATION = "dynamic-per-row"


def export_encoder(family: ModelFamily, model: Any, featurizer: Featurizer, questions: list[Question],
                   path: Path, dynamic: bool) -> None:
    """Trace the family's encoder on a real batch and write ``path`` (checked by onnx.checker)."""
    axes = {**family.dynamic_axes(dynamic), ENCODER_OUTPUT: {0: "batch"}}
    example = family.trace_batch(featurizer, questions)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about frozen shapes: the probes decide
        torch.onnx.export(
            family.onnx_module(model).eval(),
            tuple(example[name] for name in family.inputs),
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=list(family.inputs),
            output_names=[ENCODER_OUTPUT],
            dynamic_axes=axes,
        )
    onnx.checker.check_model(str(path))


def _session(path: Path, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def compare(family: ModelFamily, model: Any, featurizer: Featurizer, path: Path, checks: list[Probe],
            threads: int = 1, measure: str = "abs") -> dict[str, float]:
    """The :func:`distance` of onnxruntime's vectors to torch's per probe (inf when onnxruntime fails).

    The torch side is what the scorer computes (``ModelFamily.torch_output``).
    """
    session = _session(path, threads)
    diffs: dict[str, float] = {}
    for probe in checks:
        expected = family.torch_output(model, featurizer, probe)
        feed = {k: v.numpy() for k, v in family.probe_feed(featurizer, probe).items()}
        try:
            got = session.run([ENCODER_OUTPUT], feed)[0]
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


def checks_for(family: ModelFamily, questions: list[Question], dynamic: bool) -> list[Probe]:
    """The probes of a graph: the family's, padded to the caps when the graph has fixed lengths."""
    checks = family.probes(questions)
    return checks if dynamic else fixed(checks)


def export_verified(family: ModelFamily, model: Any, featurizer: Featurizer, questions: list[Question],
                    path: Path, tolerance: float) -> tuple[bool, dict[str, float]]:
    """Export with the family's first length mode whose every probe matches; abort if none does.

    Returns (dynamic_length, max abs diff per probe of the kept graph).
    """
    diffs: dict[str, float] = {}
    for dynamic in family.length_modes:
        export_encoder(family, model, featurizer, questions, path, dynamic)
        diffs = compare(family, model, featurizer, path, checks_for(family, questions, dynamic))
        if all(d <= tolerance for d in diffs.values()):
            return dynamic, diffs
    worst = max(diffs, key=diffs.__getitem__)
    raise UserError(
        f"the ONNX encoder does not match torch: max |onnxruntime − torch| = {diffs[worst]:.3g} "
        f"> {tolerance:g} on the {worst!r} batch; nothing was written"
    )


def quantize_int8(path: Path) -> None:
    """Replace the graph at ``path`` by its dynamic int8 quantisation: int8 weights per channel, int8
    activations with one scale per row (``exporters.row_quantize``), so a text's vector does not depend
    on what shares its run and texts can be served in batches (``batch_check``).

    Dynamic, not static: static per-tensor activation scales kept MiniLM's vectors at cosine 0.92 to
    torch at worst (QDQ and QOperator, MinMax calibration on the verification questions).
    """
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
    graph = onnx.load(str(tmp))
    per_row_activations(graph)
    onnx.save(graph, str(tmp))
    tmp.replace(path)
