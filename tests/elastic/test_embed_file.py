"""``esrerank embed`` (issue 36, item 3): each question's vector and terms written once, in process, into a
versioned vectors file (``elastic/vectors_file.py``), checked here without a cluster.

On 2,197 real AskUbuntu questions from the shipped pairs (titles with shell and code in them), the file
holds per question what a live sidecar's ``/v1/encode`` answers for its ``rerank_text`` (the same terms;
the vector within the encoder's float noise across batch shapes), under a header naming the model's
manifest sha256. A run killed with ``kill -9`` leaves nothing at ``--out``, and a file cut short or a
leftover partial body is refused in one line.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from es_commands import TITLES, TOKEN, VECTOR_TOLERANCE, embeddings, run
from live_sidecar import serve

from es_plugin_bridge.core.manifest import manifest_digest
from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Question
from es_plugin_bridge.elastic.vectors_file import read_vectors
from es_plugin_bridge.errors import UserError
from es_plugin_bridge.text.sidecar_text import rerank_text

#: Characters of shell and code the sample must hold (tests/opensearch/test_opensearch_vectors.py).
MESSY = ("$", "`", "|", '"', "{", "\\")


def askubuntu_spec(tmp_path: Path, first: int = 3000, lines: int = 1200) -> str:
    """``lines`` lines of the shipped AskUbuntu title pairs as a pairs spec."""
    path = tmp_path / f"titles-{first}-{lines}.tsv"
    rows = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[first:first + lines]
    path.write_text("".join(rows), encoding="utf-8")
    return f"pairs:{path}"


def test_embed_writes_what_the_sidecar_answers_under_the_models_manifest(exported, tmp_path, cli):
    model = exported["bow-cnn"]
    spec = askubuntu_spec(tmp_path)
    questions = list(read_spec(spec).questions.values())
    assert len(questions) == 2197 and all(any(c in q.title for q in questions) for c in MESSY)
    out = tmp_path / "askubuntu.vectors.gz"
    code, stdout, err = cli(["embed", spec, "--model", str(model), "--out", str(out), "--no-progress"])
    assert code == 0, err
    assert f"wrote 2197 questions (bow-cnn:{model.name}, dimension" in stdout
    vectors = read_vectors(out)
    assert vectors.header.manifest_sha256 == manifest_digest(model)
    assert vectors.header.count == len(vectors) == 2197
    with serve(model, TOKEN, tmp_path) as url:
        wanted = embeddings(url, questions)
    got = vectors.embed(questions)
    for question, mine in zip(questions, got, strict=True):
        theirs = wanted[question.id]
        assert mine["terms"] == theirs["terms"], question.id
        gap = np.abs(np.float32(mine["vector"]) - np.float32(theirs["vector"])).max()
        assert gap <= VECTOR_TOLERANCE, (question.id, gap)
    # no other file beside it: the temporary body was renamed away
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_question_whose_text_changed_is_not_given_its_old_vector(exported, tmp_path):
    spec = askubuntu_spec(tmp_path, lines=40)
    out = tmp_path / "v.gz"
    assert run(["embed", spec, "--model", str(exported["bow-cnn"]), "--out", str(out), "--no-progress"]) == 0
    questions = list(read_spec(spec).questions.values())
    vectors = read_vectors(out)
    edited = Question(questions[3].id, questions[3].title + " on 24.04", questions[3].body)
    with pytest.raises(LookupError, match=f"the text of {edited.id} differs"):
        vectors.embed([edited])
    assert rerank_text(questions[3]) != rerank_text(edited)


def test_a_killed_embed_leaves_no_file_and_a_cut_one_is_refused(exported, tmp_path):
    """``kill -9`` of ``esrerank embed`` of 24,000 lines of AskUbuntu pairs (batches of 8) once its body is
    being written: nothing at ``--out``; its leftover partial body, and a whole file cut short, are each
    refused with one line that says so."""
    spec = askubuntu_spec(tmp_path, first=0, lines=24_000)
    out = tmp_path / "all.vectors.gz"
    exe = Path(sys.executable).with_name("esrerank")
    process = subprocess.Popen([str(exe), "embed", spec, "--model", str(exported["bow-cnn"]),
                                "--out", str(out), "--batch-size", "8", "--no-progress"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    body = tmp_path / f".{out.name}.body.partial"
    deadline = time.monotonic() + 120
    while not (body.exists() and body.stat().st_size > 64 * 1024):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert not out.exists()
    leftover = tmp_path / "leftover.gz"
    shutil.copy(body, leftover)
    with pytest.raises(UserError, match="not a vectors file of esrerank embed"):
        read_vectors(leftover)

    small = tmp_path / "small.gz"
    assert run(["embed", askubuntu_spec(tmp_path, lines=200), "--model", str(exported["bow-cnn"]),
                "--out", str(small), "--no-progress"]) == 0
    raw = gzip.decompress(small.read_bytes()).splitlines(keepends=True)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(b"".join(raw[:-1])))  # every record, but not the last line
    with pytest.raises(UserError, match=r"incomplete \(it ends after \d+ of \d+ questions"):
        read_vectors(cut)
    torn = tmp_path / "torn.gz"
    torn.write_bytes(small.read_bytes()[: small.stat().st_size // 2])  # a copy cut mid-stream
    with pytest.raises(UserError, match="cut short|incomplete"):
        read_vectors(torn)


def test_embed_refuses_a_pairwise_model_in_one_line(pair_model, tmp_path, cli):
    _, model = pair_model
    code, _, err = cli(["embed", askubuntu_spec(tmp_path, lines=20), "--model", str(model),
                        "--out", str(tmp_path / "v.gz"), "--no-progress"])
    assert code != 0 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "has no vector per text" in err
    assert not (tmp_path / "v.gz").exists()
