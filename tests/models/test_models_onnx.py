"""Every model type exports to ONNX (opset 17, fixed padded length + mask) and onnxruntime matches torch."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime
import pytest
import torch
from test_models_data import Vocab, one_thread, read_pairs, small_model  # noqa: F401

from es_plugin_bridge.models import PAPER_TYPES

INPUTS = [
    f"{side}_{part}" for side in ("q", "d") for part in ("title_ids", "title_mask", "body_ids", "body_mask")
]


class PairScorer(torch.nn.Module):
    """Flat-tensor wrapper: score of (q, d) plus q's encoding, as an exporter would lay it out."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *tensors):
        q = self.model.encode(*tensors[:4])
        d = self.model.encode(*tensors[4:])
        components = self.model.component_scores(q, d)
        return (self.model.score(q, d), *components.values(), *q.values())


@pytest.mark.parametrize("model_type", PAPER_TYPES)
def test_export_matches_torch(model_type, tmp_path):
    rows = read_pairs("val.tsv", 5)
    vocab = Vocab([r[i] for r in rows for i in (1, 2, 3, 4)])
    bodies_q = [r[2] for r in rows]
    bodies_q[0] = ""  # an empty body must export too
    q = vocab.questions([r[1] for r in rows], bodies_q)
    d = vocab.questions([r[3] for r in rows], [r[4] for r in rows])
    # one fixed padded shape for both sides, as the sidecar will feed
    length = max(t.shape[1] for t in (*q.values(), *d.values()))
    for side in (q, d):
        for key, value in side.items():
            side[key] = torch.nn.functional.pad(value, (0, length - value.shape[1]))
    torch.manual_seed(0)
    model = small_model(model_type, len(vocab)).eval()
    wrapper = PairScorer(model).eval()
    args = tuple(q.values()) + tuple(d.values())
    with torch.no_grad():
        expected = [t.numpy() for t in wrapper(*args)]
    path = tmp_path / f"{model_type}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapper, args, str(path), dynamo=False, opset_version=17, input_names=INPUTS)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {name: tensor.numpy() for name, tensor in zip(INPUTS, args, strict=True)}
    used = {i.name for i in session.get_inputs()}
    got = session.run(None, {k: v for k, v in feed.items() if k in used})
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        if e.dtype == np.int64:
            assert np.array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, atol=1e-4, rtol=0)
