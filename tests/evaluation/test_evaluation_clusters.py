"""``--relevant cluster`` and ``--queries-from``: relevant sets checked by hand on real AskUbuntu pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from es_plugin_bridge.data.spec import read_spec
from es_plugin_bridge.data.types import Dataset
from es_plugin_bridge.evaluation.clusters import DuplicateClusters
from es_plugin_bridge.evaluation.retrieval import RetrievalProtocol, protocol_queries

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"

# Lines of train_titles.tsv (1-based). Queries: three duplicate pairs and two non-duplicates that
# touch the same questions (they must not join a cluster). Corpus: duplicates that chain onto the
# queries' questions (tarball → firefox; bootloader → Grub 2 ...), one more duplicate of "How do I
# install Ubuntu?", and unrelated lines.
QUERY_LINES = [1681, 15527, 10835, 22981, 1]
CORPUS_LINES = [16898, 20141, 207, 19803, 6719, 388, 2, 3, 4, 5]

TAR_GZ = "How do I install a .tar.gz (or .tar.bz2) file?"
TARBALL = "How to compile source code from a tarball?"
FIREFOX = "How can I install firefox manually?"
SOURCE_FILES = "How to install package that was downloaded as source files"
NO_ROOT = "How to install .tar.gz/.tar.bz2 packages without root privileges?"
BOOT_LOADER = "Making Windows Boot Loader the default instead of Grub 2"
GRUB_81 = "How to replace GRUB with Windows 8.1 default boot manager?"
WINDOWS_BOOTLOADER = "Is it possible to boot Ubuntu using the Windows bootloader?"
WITHOUT_GRUB = "Install Ubuntu 12.04 alongside Windows 8 (not preinstalled) without grub"
INSTALL_UBUNTU = "How do I install Ubuntu?"
INSTALL_1204 = "How can I install 12.04.2?"
WINDOWS_XP = "How to install Ubuntu13.04 with windows xp & remove windows xp?"

# Worked out by hand from the lines above: query → every question linked to it by duplicate pairs.
EXPECTED = {
    "q1": {
        "d1": (TAR_GZ, {TARBALL, FIREFOX, SOURCE_FILES, NO_ROOT}),
        "d2": (BOOT_LOADER, {GRUB_81, WINDOWS_BOOTLOADER, WITHOUT_GRUB}),
        "d3": (INSTALL_UBUNTU, {INSTALL_1204, WINDOWS_XP}),
    },
    "q2": {
        "d1": (TARBALL, {TAR_GZ, FIREFOX, SOURCE_FILES, NO_ROOT}),
        "d2": (GRUB_81, {BOOT_LOADER, WINDOWS_BOOTLOADER, WITHOUT_GRUB}),
        "d3": (INSTALL_1204, {INSTALL_UBUNTU, WINDOWS_XP}),
    },
}
PAIR_PARTNER = {"q1": {"d1": TARBALL, "d2": GRUB_81, "d3": INSTALL_1204},
                "q2": {"d1": TAR_GZ, "d2": BOOT_LOADER, "d3": INSTALL_UBUNTU}}


def write_lines(numbers: list[int], path: Path) -> Path:
    lines = TITLES.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[n - 1] for n in numbers), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    queries = write_lines(QUERY_LINES, tmp_path / "queries.tsv")
    return queries, write_lines(CORPUS_LINES, tmp_path / "corpus.tsv")


def titles(dataset: Dataset, ids) -> set[str]:
    return {dataset.questions[i].title for i in ids}


def test_the_lines_are_the_ones_described(files: tuple[Path, Path]) -> None:
    rows = [line.split("\t") for line in files[0].read_text(encoding="utf-8").splitlines()]
    assert [row[0] == "duplicate" for row in rows] == [True, False, True, False, True]
    assert (rows[0][1], rows[0][2]) == (TAR_GZ, TARBALL)
    assert rows[1][1] == GRUB_81 and rows[3][2] == TARBALL


@pytest.mark.parametrize("direction", ["q1", "q2"])
def test_cluster_relevant_sets_are_the_hand_checked_closure(files: tuple[Path, Path], direction: str) -> None:
    queries_data, corpus = read_spec(f"pairs:{files[0]}"), read_spec(f"pairs:{files[1]}")
    both = Dataset("both", {**queries_data.questions, **corpus.questions})
    queries, notes = protocol_queries(queries_data.pairs, [queries_data.pairs, corpus.pairs],
                                      RetrievalProtocol("cluster", direction))
    got = {q.id: (q.query.title, titles(both, q.relevant_ids)) for q in queries}
    assert got == EXPECTED[direction]
    assert "3 of 3 queries have more than one relevant question" in notes[-1]
    # The pair protocol: the pair's other question only, same queries in the same direction.
    pairs, _ = protocol_queries(queries_data.pairs, [], RetrievalProtocol("pair", direction))
    assert {q.id: (q.query.title, titles(both, q.relevant_ids)) for q in pairs} == {
        qid: (EXPECTED[direction][qid][0], {partner}) for qid, partner in PAIR_PARTNER[direction].items()}


def test_cluster_links_come_from_every_file_given(files: tuple[Path, Path]) -> None:
    queries_data = read_spec(f"pairs:{files[0]}")
    queries, _ = protocol_queries(queries_data.pairs, [queries_data.pairs], RetrievalProtocol("cluster"))
    # Without the corpus file no chain reaches beyond the queries file's own pairs.
    assert {q.id: titles(queries_data, q.relevant_ids) for q in queries} == {
        qid: {partner} for qid, partner in PAIR_PARTNER["q1"].items()}


def test_evaluate_cluster_through_the_cli(files: tuple[Path, Path], tmp_path: Path, cli) -> None:
    out = tmp_path / "cluster.json"
    code, stdout, err = cli(["evaluate", "--task", "retrieval", "--queries", f"pairs:{files[0]}",
                             "--corpus", f"pairs:{files[1]}", "--rankers", "bm25", "--relevant", "cluster",
                             "--queries-from", "q2", "--json", str(out), "--no-progress"])
    assert code == 0, err
    data = json.loads(out.read_text())
    assert list(data)[:3] == ["task", "n_queries", "rankers"] and data["n_queries"] == 3
    assert data["protocol"] == {"relevant": "cluster", "queries_from": "q2", "mean_relevant": 3.0}
    both = read_spec(f"pairs:{files[0]}")
    both.questions.update(read_spec(f"pairs:{files[1]}").questions)
    records = [json.loads(line) for line in (tmp_path / "cluster.per_query.jsonl").open()]
    assert {r["query_id"]: (both.questions[r["query_question_id"]].title, titles(both, r["relevant_ids"]))
            for r in records} == EXPECTED["q2"]
    for record in records:
        relevant = set(record["relevant_ids"])
        hits = [rank for rank, doc in enumerate(record["top_ids"], start=1) if doc in relevant]
        assert record["rank_first_relevant"] == (hits[0] if hits else None)
        assert record["metrics"]["acc@1"] == (100.0 if hits and hits[0] == 1 else 0.0)
        assert record["metrics"]["mrr@10"] == (round(100 / hits[0], 2) if hits else 0.0)
    assert round(sum(r["metrics"]["acc@10"] for r in records) / 3, 2) == data["rankers"]["bm25"]["acc@10"]


def test_relevant_and_direction_are_retrieval_options(cli) -> None:
    code, _, err = cli(["evaluate", "--task", "rerank", "--data", "semeval:x.xml", "--relevant", "cluster"])
    assert code == 2 and "--relevant does not apply to --task rerank" in err


def test_clusters_are_transitive_and_ignore_non_duplicates() -> None:
    clusters = DuplicateClusters([("a", "b"), ("c", "b"), ("d", "e"), ("f", "d"), ("b", "g")])
    assert clusters.members("a") == {"a", "b", "c", "g"}
    assert clusters.relevant("c") == {"a", "b", "g"}
    assert clusters.relevant("e") == {"d", "f"}
    assert clusters.members("z") == {"z"} and clusters.relevant("z") == frozenset()
    assert clusters.sizes() == [4, 3]
    clusters.link("g", "f")
    assert clusters.relevant("a") == {"b", "c", "d", "e", "f", "g"}
