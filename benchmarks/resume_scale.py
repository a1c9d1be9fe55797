"""``es index`` killed at a random point and resumed, at the scale ladder's sizes (issue "A million
questions", item 4): nothing lost, nothing stored twice, and what the resume costs.

For each ``--questions N``: the ladder's first N questions (``benchmarks/scale.py``'s texts and order,
``build/scale/questions-N.jsonl``, written here if missing), a fresh Maven-assembled OpenSearch node
(``--heap``), ``es setup``; then ``esrerank es index jsonl:FILE`` as its own process, killed with
``SIGKILL`` once the index's ``_count`` passes a seeded random point between 20 % and 80 % of N; then the
same command with ``--resume``, to its end. Then every ``_id`` in the index is read back (scroll) and
compared with the file's ids: missing, unexpected, stored twice (each question's id is its ``_id``, so a
second copy could only come under another id, which ``unexpected`` counts), and ``_count`` against the
file.

``--embedding text`` (default): ``es setup --no-vectors``, no sidecar, the engine and the client alone
(the ladder's fastest path, so a million fits in minutes here). ``--embedding client``: the index with
vectors, ``es index`` asking a fresh ``esrerank serve`` of the ladder's BOW-CNN (``scale.py``'s
default model) for each batch, as a site indexes.

Usage: ``python benchmarks/resume_scale.py [--questions 1000000] [--embedding text|client]
[--seed 1] [--heap 2g] [--out benchmarks/resume_scale.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _machine import load_average, machine
from index_speed import setup
from opensearch_modes import FreshSidecar
from scale import (
    BUILD,
    ROOT,
    default_model,
    held_out_titles,
    real_questions,
    rest,
    rung_questions,
    write_jsonl,
)

HERE = Path(__file__).resolve().parent
INDEX = "resume-scale"


def questions_file(count: int) -> tuple[Path, list[str]]:
    """The ladder's first ``count`` questions as JSONL (reused when ``scale.py`` wrote it), and their ids."""
    path = BUILD / "scale" / f"questions-{count}.jsonl"
    if not path.is_file():
        real, _ = real_questions(set(held_out_titles()))
        questions, _ = rung_questions(real, count)
        write_jsonl(questions, path)
    ids = [json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len(ids) != count or len(set(ids)) != count:
        sys.exit(f"{path}: {len(ids)} lines, {len(set(ids))} distinct ids, not {count}; delete it and rerun")
    return path, ids


def stored_ids(es: str) -> list[str]:
    """Every ``_id`` in the index, by scroll (a repeated id would appear twice)."""
    page = rest(f"{es}/{INDEX}/_search?scroll=5m", "POST",
                {"size": 10_000, "_source": False, "sort": ["_doc"], "query": {"match_all": {}}})
    ids: list[str] = []
    while page["hits"]["hits"]:
        ids += [hit["_id"] for hit in page["hits"]["hits"]]
        page = rest(f"{es}/_search/scroll", "POST", {"scroll": "5m", "scroll_id": page["_scroll_id"]})
    rest(f"{es}/_search/scroll", "DELETE", {"scroll_id": page["_scroll_id"]})
    return ids


def count(es: str) -> int:
    return int(rest(f"{es}/{INDEX}/_count")["count"])


def run_one(n: int, args: argparse.Namespace, home: Path) -> dict[str, Any]:
    """One size: a fresh node, a killed run, its resume, the ids read back."""
    from es_plugin_bridge.local_http import free_port
    from es_plugin_bridge.opensearch_node import node

    path, ids = questions_file(n)
    kill_at = random.Random(args.seed * 1_000_003 + n).randrange(n // 5, 4 * n // 5)
    run_dir = BUILD / "opensearch" / "bench-resume"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    started = node.start(home, run_dir, heap=args.heap, timeout=300)
    model, _ = default_model()
    sidecar = FreshSidecar(model, free_port(), [])
    try:
        es = started.url
        sidecar.restart()
        setup(model, INDEX, ["--no-vectors"] if args.embedding == "text" else [], es, sidecar.url)
        if args.embedding == "text":
            sidecar.stop()  # nothing asks it: the text-only index has no vectors
        exe = str(Path(sys.executable).with_name("esrerank"))
        argv = [exe, "es", "index", f"jsonl:{path}", "--index", INDEX, "--es-url", es, "--sidecar",
                sidecar.url, "--batch-size", str(args.batch_size), "--no-progress", "--es-timeout", "120"]
        load = load_average()
        t0 = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while count(es) < kill_at:
            if process.poll() is not None:
                sys.exit(f"es index ended (exit {process.returncode}) before {kill_at:,} were stored: "
                         f"{process.stderr.read()[-2000:] if process.stderr else ''}")
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)
        killed_seconds = time.perf_counter() - t0
        rest(f"{es}/{INDEX}/_refresh", "POST")
        at_kill = count(es)
        t1 = time.perf_counter()
        resumed = subprocess.run([*argv, "--resume"], capture_output=True, text=True)
        resume_seconds = time.perf_counter() - t1
        if resumed.returncode != 0:
            sys.exit(f"es index --resume failed (exit {resumed.returncode}): {resumed.stderr[-2000:]}")
        rest(f"{es}/{INDEX}/_refresh", "POST")
        stored = stored_ids(es)
        unique, wanted = set(stored), set(ids)
        report = next((line for line in resumed.stdout.splitlines() if line.startswith("read ")), None)
        return {
            "questions": n, "embedding": args.embedding, "data_file": str(path.relative_to(ROOT)),
            "kill_target": kill_at, "stored_when_killed": at_kill,
            "seconds_until_killed": round(killed_seconds, 2), "killed_exit_status": process.returncode,
            "resume_command": " ".join(["esrerank", *argv[1:], "--resume"]).replace(str(ROOT) + "/", ""),
            "resume_seconds": round(resume_seconds, 2), "resume_report": report,
            "resumed_questions_per_second": round((n - at_kill) / resume_seconds, 1),
            "count_after": count(es), "ids_read_back": len(stored), "missing": len(wanted - unique),
            "unexpected": len(unique - wanted), "stored_twice": len(stored) - len(unique),
            "load_average_before": load, "load_average_after": load_average(),
        }
    finally:
        sidecar.stop()
        node.stop(started)
        shutil.rmtree(run_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=lambda t: [int(x) for x in t.split(",") if x.strip()],
                        default=[1_000_000], help="Sizes, comma-separated (the ladder's first N each).")
    parser.add_argument("--embedding", choices=("text", "client"), default="text")
    parser.add_argument("--seed", type=int, default=1, help="Where each run is killed.")
    parser.add_argument("--heap", default="2g", help="The node's JVM heap.")
    parser.add_argument("--batch-size", type=int, default=200, help="es index's batch size.")
    parser.add_argument("--out", type=Path, default=HERE / "resume_scale.json")
    args = parser.parse_args()
    from es_plugin_bridge.opensearch_node import layout

    home = layout.assemble(layout.default_home(ROOT))
    report = machine(node=f"OpenSearch {layout.SERVER_VERSION} assembled from Maven Central, a fresh "
                          f"single node per size, {args.heap} heap, on this machine", heap=args.heap)
    report["command"] = " ".join(["python", "benchmarks/resume_scale.py", *sys.argv[1:]])
    report["runs"] = []
    for n in args.questions:
        print(f"{n:,} questions: es index, killed at a random point, then --resume", flush=True)
        run = run_one(n, args, home)
        report["runs"].append(run)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(json.dumps({k: run[k] for k in ("stored_when_killed", "resume_seconds", "count_after",
                                              "missing", "unexpected", "stored_twice")}), flush=True)


if __name__ == "__main__":
    main()
