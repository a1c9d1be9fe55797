"""``esrerank evaluate`` end to end: the contract's JSON, per-query JSONL, plot, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from es_plugin_bridge.evaluation.report import write_atomic

SAMPLES = Path(__file__).resolve().parents[2] / "es_plugin_bridge" / "samples"
SEMEVAL_DEV = SAMPLES / "semeval2016-task3" / "SemEval2016-Task3-CQA-QL-dev.xml"
TITLES = SAMPLES / "askubuntu-pairs" / "train_titles.tsv"
VAL = SAMPLES / "askubuntu-pairs" / "val.tsv"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def lines_of(path: Path, start: int, stop: int, out: Path) -> Path:
    out.write_text("".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[start:stop]),
                   encoding="utf-8")
    return out


def test_rerank_through_the_console_entry_point(tmp_path):
    out = tmp_path / "out" / "semeval.json"
    proc = subprocess.run(
        [sys.executable, "-m", "es_plugin_bridge.cli.main", "evaluate", "--task", "rerank",
         "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "given,bm25,lmdirichlet", "--json", str(out),
         "--plot", str(tmp_path / "semeval.png")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    # the contract's three keys first, then the paired tests (evaluation/significance.py)
    assert list(data) == ["task", "n_queries", "rankers", "significance"]
    assert data["task"] == "rerank" and data["n_queries"] == 50
    assert list(data["rankers"]) == ["given", "bm25", "lmdirichlet"]
    for metrics in data["rankers"].values():
        assert list(metrics) == ["map", "mrr", "p@1", "p@5", "p@10"]
        assert all(0.0 <= v <= 100.0 and round(v, 2) == v for v in metrics.values())
    assert data["rankers"]["given"]["map"] == 71.35 and data["rankers"]["given"]["mrr"] == 76.67
    records = [json.loads(line) for line in (tmp_path / "out" / "semeval.per_query.jsonl").open()]
    assert len(records) == 3 * 50
    assert {"query_id", "ranker", "metrics", "rank_first_relevant"} <= set(records[0])
    assert (tmp_path / "semeval.png").read_bytes()[:8] == PNG_MAGIC
    assert "71.35" in proc.stdout and "given" in proc.stdout


def test_retrieval_with_corpus_files(tmp_path, cli):
    queries = lines_of(TITLES, 0, 1500, tmp_path / "queries.tsv")
    corpus = lines_of(TITLES, 1500, 4000, tmp_path / "corpus.tsv")
    per_query = tmp_path / "runs" / "retrieval.jsonl"
    code, out, err = cli(["evaluate", "--task", "retrieval", "--queries", f"pairs:{queries}",
                          "--corpus", f"pairs:{corpus}", "--rankers", "bm25,tfidf", "--json",
                          str(tmp_path / "retrieval.json"), "--per-query", str(per_query), "--no-progress"])
    assert code == 0, err
    data = json.loads((tmp_path / "retrieval.json").read_text())
    n_duplicates = sum(line.startswith("duplicate\t") for line in queries.read_text().splitlines())
    assert 0 < data["n_queries"] <= n_duplicates
    assert list(data["rankers"]["bm25"]) == ["acc@1", "acc@5", "acc@10", "mrr@10"]
    assert data["rankers"]["bm25"]["acc@10"] > 10.0
    assert len(per_query.read_text().splitlines()) == 2 * data["n_queries"]
    assert "distinct questions" in out


def test_classify_with_first_stage_rankers(tmp_path, cli):
    dev = lines_of(VAL, 0, 400, tmp_path / "dev.tsv")
    test = lines_of(VAL, 400, 1000, tmp_path / "test.tsv")
    code, _, err = cli(["evaluate", "--task", "classify", "--data", f"pairs:{test}", "--dev", f"pairs:{dev}",
                        "--rankers", "bm25", "--json", str(tmp_path / "c.json"), "--no-progress"])
    assert code == 0, err
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["task"] == "classify" and data["n_queries"] == 600
    assert list(data["rankers"]["bm25"]) == ["accuracy", "threshold"]
    assert data["rankers"]["bm25"]["accuracy"] > 60.0


def _bad_tsv(tmp_path: Path) -> Path:
    path = tmp_path / "bad.tsv"
    path.write_text("duplicate\tHow do I mount a disk?\tMounting disks\nduplicate\tonly two fields\n")
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--task", "rerank", "--data", "semeval:/no/such/file.xml"], "does not exist"),
        (["--task", "rerank", "--data", f"xml:{SEMEVAL_DEV}"], "unknown format 'xml'"),
        (["--task", "retrieval", "--queries", "pairs:{bad}"], "bad.tsv:2"),
        (["--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "given,bm99"],
         "unknown ranker 'bm99'"),
        (["--task", "ranking", "--data", f"semeval:{SEMEVAL_DEV}"], "'--task'"),
        (["--data", f"semeval:{SEMEVAL_DEV}"], "Missing option '--task'"),
        (["--task", "rerank"], "--task rerank needs --data"),
        (["--task", "classify", "--data", "pairs:{bad}"], "--task classify needs --dev"),
        (["--task", "classify", "--data", f"pairs:{VAL}", "--dev", f"pairs:{VAL}"], "needs --model DIR"),
        (["--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "given,model"],
         "ranker 'model' needs --model DIR"),
        (["--task", "retrieval", "--queries", f"pairs:{VAL}", "--rankers", "fused"],
         "ranker 'fused' needs --model DIR"),
        (["--task", "retrieval", "--queries", f"pairs:{VAL}", "--rankers", "given"],
         "'given' does not support --task retrieval"),
        (["--task", "rerank", "--data", f"pairs:{VAL}", "--rankers", "bm25"], "no ranking queries"),
        (["--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--queries", f"pairs:{VAL}"],
         "--queries does not apply to --task rerank"),
        (["--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "bm25",
          "--param", "bm25.k1=-1"],
         "'k1' must be"),
        (["--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "bm25", "--param", "dfr.c=2"],
         "ranker 'dfr' is not in --rankers"),
    ],
)
def test_bad_input_gives_one_error_line_and_no_output(tmp_path, cli, argv, message):
    bad = _bad_tsv(tmp_path)
    out = tmp_path / "out.json"
    argv = [a.replace("{bad}", str(bad)) for a in argv]
    code, _, err = cli(["evaluate", *argv, "--json", str(out), "--no-progress"])
    assert code != 0
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and message in err
    assert list(tmp_path.iterdir()) == [bad]  # nothing written, not even a temporary file


def test_atomic_write_keeps_the_previous_file_on_error(tmp_path):
    target = tmp_path / "result.json"
    target.write_text("previous")

    def fail_midway(handle):
        handle.write("partial")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_atomic(target, fail_midway)
    assert target.read_text() == "previous"
    assert list(tmp_path.iterdir()) == [target]


def test_similarity_parameters_change_the_ranking(tmp_path, cli):
    base = ["evaluate", "--task", "rerank", "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "bm25",
            "--no-progress", "--json"]
    assert cli([*base, str(tmp_path / "default.json")])[0] == 0
    assert cli([*base, str(tmp_path / "b0.json"), "--param", "bm25.b=0"])[0] == 0
    default = json.loads((tmp_path / "default.json").read_text())["rankers"]["bm25"]
    no_length_norm = json.loads((tmp_path / "b0.json").read_text())["rankers"]["bm25"]
    assert default != no_length_norm  # b = 0 ignores document length: another ranking


def test_help_lists_the_tasks(cli):
    code, out, _ = cli(["evaluate", "--help"])
    assert code == 0
    assert "rerank|retrieval|classify" in out
