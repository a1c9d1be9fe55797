"""Embed once, index many times; and a run killed at any point (issue 36, items 3 and 4), on a real
OpenSearch 2.19.1 node.

*Embed once.* 2,197 real AskUbuntu questions (1,200 lines of the shipped title pairs, over a hundred
titles with shell or code in them) are indexed twice from the same ``es setup``: once by ``es index``
asking the live sidecar, once by ``esrerank embed`` + ``es index --vectors`` with no sidecar at the URL
given. Both indexes hold the same documents (text, BOW terms, vectors within the encoder's float noise)
and answer the same top 10 in every mode that reads the vectors (``vectors``, ``hybrid``, ``hybrid-rrf``,
and ``hybrid`` with the lucene engine's HNSW). A file embedded by another model is refused in one line;
a question the file lacks fails alone and ``--resume`` with a file that has it sends only that one.

*Killed at any point.* ``kill -9`` of ``es index`` (4,000 titles, batches of 20, the read-ahead on) at a
random number of stored questions; ``--resume`` then leaves every question stored exactly once, each
with the vector and terms the sidecar answers for it (explicit ``_id`` and the ``index`` op type:
a batch sent twice overwrites, ``elastic/bulk.py``).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal

import pytest
from es_commands import TITLES, TOKEN, assert_stored_as_embedded, common, embeddings, run, sources
from test_index_faults import askubuntu_titles, indexing, setup, stored_count, wait_until_stored
from test_opensearch_vectors import askubuntu_queries

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.local_http import free_port

pytestmark = [pytest.mark.engine, pytest.mark.slow]

WINDOW = 50
#: What a mode's scores may differ by between the two indexes: the vectors differ by float noise only.
SCORE_GAP = 1e-5


@pytest.fixture(scope="module")
def twins(opensearch, sidecar, tmp_path_factory):
    """The same AskUbuntu questions indexed by ``es index`` (client embedding) and by ``esrerank embed`` +
    ``es index --vectors`` with no sidecar reachable: (spec, vectors file, the two index names)."""
    url, model = sidecar
    tmp = tmp_path_factory.mktemp("twins")
    path = tmp / "titles.tsv"
    path.write_text("".join(TITLES.read_text(encoding="utf-8").splitlines(keepends=True)[3000:4200]),
                    encoding="utf-8")
    spec = f"pairs:{path}"
    out = tmp / "askubuntu.vectors.gz"
    assert run(["embed", spec, "--model", str(model), "--out", str(out), "--no-progress"]) == 0
    for index in ("embed-client", "embed-file"):
        setup(opensearch, url, model, index)
    assert run(["es", "index", spec, "--index", "embed-client", "--no-progress",
                *common(opensearch, url)]) == 0
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens here: the file must be all it needs
    assert run(["es", "index", spec, "--index", "embed-file", "--vectors", str(out), "--no-progress",
                *common(opensearch, nobody)]) == 0
    return spec, out, "embed-client", "embed-file"


def test_the_file_stores_what_client_embedding_stores(twins, opensearch, sidecar):
    url, _ = sidecar
    spec, _, client_index, file_index = twins
    questions = list(read_spec(spec).questions.values())
    by_client, by_file = sources(opensearch, client_index), sources(opensearch, file_index)
    assert len(questions) == 2197 and set(by_client) == set(by_file) == {q.id for q in questions}
    wanted = embeddings(url, questions)
    for question in questions:
        mine, theirs = by_file[question.id], by_client[question.id]
        assert {k: v for k, v in mine.items() if k != "vector"} == \
               {k: v for k, v in theirs.items() if k != "vector"}, question.id
        assert_stored_as_embedded(mine, wanted[question.id], question)


@pytest.mark.parametrize("mode", ["vectors", "hybrid", "hybrid-rrf", "hybrid --knn hnsw"])
def test_the_same_top_10_in_every_vector_mode(twins, opensearch, sidecar, cli, mode):
    url, _ = sidecar
    spec, _, client_index, file_index = twins
    differ = {}
    queries = askubuntu_queries(spec)[:40]  # 25 duplicates' queries, then titles with shell and code
    for text in queries:
        got = [_top(cli, opensearch, url, index, mode.split(), text) for index in (client_index, file_index)]
        if [d for d, _ in got[0]] != [d for d, _ in got[1]] or any(
                abs(a - b) > SCORE_GAP for (_, a), (_, b) in zip(*got, strict=True)):
            differ[text] = got
    assert differ == {}, f"{len(differ)} of {len(queries)} queries differ"


def _top(cli, opensearch, url: str, index: str, mode: list[str], text: str) -> list[tuple[str, float]]:
    code, out, err = cli(["es", "search", "--mode", *mode, "--json", "--window", str(WINDOW),
                          "--index", index, *common(opensearch, url), "--", text])
    assert code == 0, err
    hits = json.loads(out)["hits"]
    assert hits, text
    return [(hit["id"], hit["score"]) for hit in hits]


def test_a_file_of_another_model_is_refused_in_one_line(twins, opensearch, sidecar, exported, cli, tmp_path):
    url, _ = sidecar
    spec, _, _, file_index = twins
    other = tmp_path / "gru.vectors.gz"
    assert cli(["embed", spec, "--model", str(exported["gru"]), "--out", str(other), "--no-progress"])[0] == 0
    before = stored_count(opensearch, file_index)
    code, out, err = cli(["es", "index", spec, "--index", file_index, "--vectors", str(other),
                          "--no-progress", *common(opensearch, url)])
    assert code != 0 and "Traceback" not in err and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: {other} was embedded by model gru:")
    assert "not by index embed-file's model" in line
    assert stored_count(opensearch, file_index) == before


def test_a_question_missing_from_the_file_fails_alone_and_resume_sends_only_it(opensearch, sidecar, cli,
                                                                               tmp_path):
    url, model = sidecar
    titles = askubuntu_titles(0, 301)
    first = tmp_path / "first.jsonl"
    rows = [json.dumps({"id": f"q{n}", "title": t}) + "\n" for n, t in enumerate(titles[:300])]
    first.write_text("".join(rows), encoding="utf-8")
    everything = tmp_path / "all.jsonl"
    everything.write_text(first.read_text(encoding="utf-8") + json.dumps({"id": "late", "title": titles[300]})
                          + "\n", encoding="utf-8")
    old, new = tmp_path / "old.gz", tmp_path / "new.gz"
    assert run(["embed", f"jsonl:{first}", "--model", str(model), "--out", str(old), "--no-progress"]) == 0
    index = "embed-missing"
    setup(opensearch, url, model, index)
    argv = ["es", "index", f"jsonl:{everything}", "--index", index, "--no-progress", "--batch-size", "50",
            *common(opensearch, f"http://127.0.0.1:{free_port()}")]
    code, out, err = cli([*argv, "--vectors", str(old)])
    assert code == 1 and "Traceback" not in err
    assert "read 301  indexed 300  skipped 0  failed 1" in out
    (failed,) = [line for line in out.splitlines() if line.startswith("failed ")]
    assert failed.startswith("failed late: ") and f"late is not in {old.name}" in failed
    assert run(["embed", f"jsonl:{everything}", "--model", str(model), "--out", str(new),
                "--no-progress"]) == 0
    code, out, err = cli([*argv, "--vectors", str(new), "--resume"])
    assert code == 0, err
    assert "read 301  indexed 1  skipped 300  failed 0" in out
    assert stored_count(opensearch, index) == 301


def test_es_index_killed_at_a_random_point_and_resumed_stores_every_question_once(opensearch, sidecar,
                                                                                   tmp_path, monkeypatch):
    url, model = sidecar
    index = "killed-anywhere"
    setup(opensearch, url, model, index)
    seed = random.randrange(1 << 30)
    kill_at = random.Random(seed).randrange(100, 3600)
    with indexing(tmp_path, opensearch.url, url, index) as (process, titles):
        wait_until_stored(opensearch.url, index, kill_at, process)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert kill_at <= stored_count(opensearch, index) < len(titles), seed
    monkeypatch.setenv("ESRERANK_TOKEN", TOKEN)
    path = tmp_path / "titles.jsonl"
    assert run(["es", "index", f"jsonl:{path}", "--index", index, "--no-progress", "--batch-size", "20",
                "--es-url", opensearch.url, "--sidecar", url, "--resume"]) == 0, seed
    stored = sources(opensearch, index)
    assert stored_count(opensearch, index) == len(stored) == len(titles), seed  # each once
    questions = list(read_spec(f"jsonl:{path}").questions.values())
    assert set(stored) == {q.id for q in questions}
    wanted = embeddings(url, questions)
    for question in questions:
        assert_stored_as_embedded(stored[question.id], wanted[question.id], question)


def test_a_corrupted_record_fails_alone_named_and_nothing_of_it_is_stored(opensearch, sidecar, cli, tmp_path):
    """Issue 48, finding 6: three records of a real file corrupted (an all-zero vector, a NaN and an
    infinite term weight); before, each was stored without its vector or its BOW features and counted
    as indexed (rc 0). Now each fails alone, named with its reason, and nothing of it is stored."""
    url, model = sidecar
    titles = askubuntu_titles(0, 300)
    data = tmp_path / "titles.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{n}", "title": t}) + "\n" for n, t in enumerate(titles)),
                    encoding="utf-8")
    good, bad = tmp_path / "good.vectors.gz", tmp_path / "bad.vectors.gz"
    assert run(["embed", f"jsonl:{data}", "--model", str(model), "--out", str(good), "--no-progress"]) == 0
    with gzip.open(good, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines]
    by_id = {row["id"]: row for row in rows if "id" in row}
    by_id["q7"]["vector"] = [0.0] * len(by_id["q7"]["vector"])
    for id_, weight in (("q11", float("nan")), ("q13", float("inf"))):
        by_id[id_]["terms"][next(iter(by_id[id_]["terms"]))] = weight
    with gzip.open(bad, "wt", encoding="utf-8") as out:
        out.write("".join(json.dumps(row) + "\n" for row in rows))
    index = "embed-corrupted"
    setup(opensearch, url, model, index)
    code, out, err = cli(["es", "index", f"jsonl:{data}", "--index", index, "--vectors", str(bad),
                          "--no-progress", "--batch-size", "50",
                          *common(opensearch, f"http://127.0.0.1:{free_port()}")])
    assert code == 1 and "Traceback" not in err
    assert "read 300  indexed 297  skipped 0  failed 3" in out
    failed = {line.split(":")[0]: line for line in out.splitlines() if line.startswith("failed ")}
    assert set(failed) == {"failed q7", "failed q11", "failed q13"}
    assert "the vector of q7 is all zeros (a cosine index cannot store it)" in failed["failed q7"]
    assert "of q11 is nan, not a finite number" in failed["failed q11"]
    assert "of q13 is inf, not a finite number" in failed["failed q13"]
    stored = sources(opensearch, index)
    assert len(stored) == 297 and not {"q7", "q11", "q13"} & set(stored)
    assert all("vector" in doc and "bow" in doc for doc in stored.values())
