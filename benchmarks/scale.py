"""A scale ladder (issue "A million questions", item 1): what the product costs on one OpenSearch node as
the collection grows, 10,000 → 100,000 → 1,000,000 questions, titles and bodies as a user's site has them.

Each rung runs on a fresh Maven-assembled OpenSearch node (``es_plugin_bridge/opensearch_node``, heap
``--heap``, 2 GB by default) with a fresh ``esrerank serve`` on one port beside it, smallest rung first.
``--nodes 3`` runs each rung on a fresh three-node cluster instead (``opensearch_node/cluster.py``, every
node on this machine, ``--heap`` each) with every index of ``es setup --shards 3 --replicas 1``
(``--shards``, ``--replicas``): ``es setup``, ``es index`` and the searches name every node (the client
spreads its requests over them); disk and heap are then the cluster's, every copy counted; the HNSW twins
keep the serving index's shards, without replicas.

*Texts.* Every distinct question the shipped samples and ``../shared/data`` hold (AskUbuntu titles and
titles with bodies, SemEval-2016 Task 3, Meta Stack Exchange, Quora, medical pairs; read with the
product's own readers, deduplicated by title and body), minus 1,000 AskUbuntu titles held out as queries,
in a seeded shuffle: a rung takes the first N. Beyond the real ones (about 90,000), deterministic
variants: real question i's title with the body of a real question that has one (``v-<n>``, the rule in
the JSON). The rung's questions are written to ``build/scale/questions-N.jsonl`` (``esrerank es index
jsonl:FILE`` reads it) and indexed from the same list in this process.

*Model.* Default: a BOW-CNN with the project's default recipe (``esrerank train --model-type bow-cnn``),
trained for 60 s on AskUbuntu title pairs and exported once into ``build/scale-models/bow-cnn`` (this
measures cost, not quality: its dev MAP is recorded, not sought). ``--model DIR`` takes any export for
every rung, ``--rung-model N=DIR`` for one rung (e.g. MiniLM's int8 export where fp32 would take hours).

*Per rung*, in this order, the figures of the JSON:

- ``indexing``: ``es setup`` then ``es index``'s run (``elastic/indexing.py``'s ``index_run``, in this
  process, as ``benchmarks/index_speed.py`` runs it; the refresh included, reading the JSONL not) timed,
  questions/s, for ``client_embedding`` (``es setup``: ``es index`` embeds through ``/v1/encode``),
  ``text_only`` (``es setup --no-vectors``) and ``ingest_embedding`` (``es setup --embed-at-ingest``:
  OpenSearch's ingest pipeline calls the sidecar through ml-commons; ``--skip-ingest`` skips it,
  ``--ingest-limit N`` times the rung's first N questions only). Each embedding run starts the sidecar
  anew with its default encoding cache (empty).
- ``encoder_alone`` (first, before any indexing): every batch of the rung embedded by the call ``es index``
  makes (``SidecarClient.embed``) on a fresh sidecar, nothing stored: the encoder's own questions/s on
  the same texts and batch size; ``client_embedding_of_encoder`` = client embedding's rate / that.
- ``embed_once``: ``esrerank embed jsonl:<the rung's file>`` into ``build/scale/vectors-N.gz``, then
  ``es setup`` and ``es index --vectors`` of it into ``scale-file`` with the sidecar stopped (the run names
  a port where nothing listens), each timed; the index is dropped after.
- ``disk_bytes_per_1000``: the bytes of each index's folder on the node's disk (after refresh and flush;
  ``_cat/indices`` caches its figure for 10 s) per 1,000 questions, and for the client-embedded index
  after ``_forcemerge`` to one segment too (``disk_bytes``: the totals).
- ``heap_bytes_per_1000``: the node's JVM heap in use (``_nodes/stats/jvm``, right after a full GC by
  ``jcmd PID GC.run``, the least of 3 readings) with the client-embedded index built (and merged), less the
  same figure right after its ``es setup``, per 1,000 questions (``heap_used_bytes``: every reading, the
  fresh node's too). The other indexes are built after these readings. Segment memory
  (``_stats/segments``) beside it: OpenSearch 2.x reports 0 there (Lucene 9 keeps terms off the heap).
- ``hnsw_build_seconds``: every cosine model's index is a k-NN index whose vector field has a lucene HNSW
  graph (``elastic/mappings.py``); ``es setup`` has no switch for a flat one. So the client-embedded
  index is copied twice with ``_reindex`` (inside the node, nothing embedded): into its own mapping
  (HNSW) and into the same mapping with the flat ``knn_vector`` (no graph, no ``index.knn``), each then
  ``_forcemerge``d to one segment (merging rebuilds the graph). The figure is (reindex + forcemerge with
  HNSW) − (the same without); each part is in ``hnsw``. ``client_forcemerge_seconds``: the forcemerge of
  the client-embedded index itself.
- ``latency_ms``: for ``--queries`` held-out AskUbuntu titles, each system as ``es search`` runs it
  (the library's own mode objects, ``open_mode``; window ``--window``, top 10) on the client-embedded,
  merged index: ``first_stage`` (BM25 top 10, one search), ``rerank``, ``bridge``, ``vectors``
  (rescores the BM25 window: no k-NN in it), ``hybrid`` and ``hybrid-rrf`` with ``--knn exact``
  (script_score over every vector) and with ``--knn hnsw`` (the k-NN query on the graph). At each
  ``--clients`` count (threads, each with its own mode object and client): p50/p95/p99 ms of the searches
  that answered, their count, errors, answers not reranked (bridge's fallback) and searches/s. Each load
  is bounded by count (``--max-searches``, default ``--queries``) and time (``--seconds-per-load``);
  ``--warmup`` searches of other titles first. Caches off: the sidecar runs with ``--cache-size 0``, and
  the index's request cache is disabled (``index.requests.cache.enable: false``; by default it caches
  only ``size: 0`` searches anyway).
- ``load_average``: the machine's load at the start and end of the rung (other work skews every figure).

The JSON is rewritten before every phase and after each rung, so a long run stopped later keeps what it
measured (a rung stopped midway says ``"finished": false``). The HNSW twins run last in a rung, after the
latencies. For a million questions, where one rung takes hours here: ``--rate-sample N`` times the encoder
alone and embed once on the rung's first N questions (rates, not totals; the JSON says so),
``--skip-hnsw`` leaves the twins out, and ``--append`` adds the run's rungs to an existing ``--out``
(measured with the same layout, heap and latency setup, or refused), each rung naming its own command.

Usage: ``python benchmarks/scale.py [--rungs 10000,100000,1000000] [--queries 200] [--clients 1,8]
[--seconds-per-load 60] [--max-searches N] [--model DIR] [--rung-model N=DIR] [--heap 2g] [--skip-ingest]
[--ingest-limit N] [--rate-sample N] [--skip-hnsw] [--nodes 3 [--shards 3] [--replicas 1]] [--append]
[--out benchmarks/scale.json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _machine import load_average, machine
from index_speed import setup
from opensearch_modes import FreshSidecar

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUILD = ROOT / "build"
SAMPLES = ROOT / "es_plugin_bridge" / "samples"
SHARED = ROOT.parent / "shared" / "data"
#: AskUbuntu titles kept out of every rung: the queries (the first ``--queries``) and warm-up (the last).
HELD_OUT, HELD_OUT_SEED, ORDER_SEED = 1000, 7, 11
#: The latency systems: (name in the JSON, mode (None: the first stage alone), ``--knn``).
SYSTEMS: tuple[tuple[str, str | None, str], ...] = (
    ("first_stage", None, "exact"),
    ("rerank", "rerank", "exact"),
    ("bridge", "bridge", "exact"),
    ("vectors", "vectors", "exact"),
    ("hybrid", "hybrid", "exact"),
    ("hybrid_knn_hnsw", "hybrid", "hnsw"),
    ("hybrid-rrf", "hybrid-rrf", "exact"),
    ("hybrid-rrf_knn_hnsw", "hybrid-rrf", "hnsw"),
)
#: The indexes of a rung: (name in the JSON, index, ``es setup`` flags).
INDEXES = {"client_embedding": ("scale-client", []), "text_only": ("scale-text", ["--no-vectors"]),
           "ingest_embedding": ("scale-ingest", ["--embed-at-ingest"])}
SERVING_INDEX = "scale-client"
TRAIN_SECONDS = 60
VARIANT_RULE = ("variant n (id v-<n>, after every real question): the title of real question i = n mod R "
                "(R real questions in the rung order) with the body of bodied real question "
                "(i + n div R) mod B (B real questions with a body, in a seeded order); a variant whose "
                "text equals a question already taken is passed over")
STARTED = time.perf_counter()


def say(rung: int | None, phase: str) -> None:
    """One progress line: elapsed time, rung, phase."""
    where = f"rung {rung:,}" if rung is not None else "setup"
    print(f"[{time.perf_counter() - STARTED:8.1f} s] {where}: {phase}", flush=True)


# -- texts ----------------------------------------------------------------------------------------------
def text_specs() -> list[str]:
    """Every data file with questions: ``../shared/data`` where present, else the shipped samples."""
    if (SHARED / "askubuntu-pairs" / "val.tsv").is_file():
        pairs, semeval = SHARED / "askubuntu-pairs", SHARED / "semeval2016-task3"
        extra = SHARED / "extra"
        specs = [f"pairs:{pairs / 'val.tsv'}", f"pairs:{pairs / 'train_titles.tsv'}",
                 *(f"semeval:{p}" for p in sorted(semeval.glob("*.xml")))]
        specs += [f"pairs:{extra / 'meta-stackexchange-val.tsv'}", f"pairs:{extra / 'quora-pairs-train.tsv'}",
                  f"mqp:{extra / 'medical-question-pairs.csv'}"]
        return [s for s in specs if Path(s.partition(":")[2]).is_file()]
    pairs = SAMPLES / "askubuntu-pairs"
    return [f"pairs:{pairs / 'val.tsv'}", f"pairs:{pairs / 'train_titles.tsv'}",
            *(f"semeval:{p}" for p in sorted((SAMPLES / "semeval2016-task3").glob("*.xml")))]


def text_key(title: str, body: str) -> str:
    return f"{title.strip()}\n{body.strip()}"


def held_out_titles() -> list[str]:
    """:data:`HELD_OUT` distinct AskUbuntu titles (seeded), never indexed: the queries and warm-up."""
    folder = SHARED / "askubuntu-pairs"
    path = (folder if folder.is_dir() else SAMPLES / "askubuntu-pairs") / "train_titles.tsv"
    lines = path.read_text(encoding="utf-8").splitlines()
    titles = sorted({t.strip() for line in lines for t in line.split("\t")[1:] if t.strip()})
    return random.Random(HELD_OUT_SEED).sample(titles, HELD_OUT)


def real_questions(held_out: set[str]) -> tuple[list[Any], dict[str, int]]:
    """Every distinct question of :func:`text_specs` (by title and body; a repeated id is kept once),
    none whose title is held out, in a seeded shuffle; and how many each file gave."""
    from es_plugin_bridge.data.spec import read_spec

    seen_text: set[str] = set()
    seen_id: set[str] = set()
    out, sources = [], {}
    for spec in text_specs():
        before = len(out)
        for q in read_spec(spec).questions.values():
            key = text_key(q.title, q.body)
            if key in seen_text or q.id in seen_id or q.title.strip() in held_out or not q.title.strip():
                continue
            seen_text.add(key)
            seen_id.add(q.id)
            out.append(q)
        sources[str(Path(spec.partition(":")[2]).relative_to(ROOT.parent))] = len(out) - before
    random.Random(ORDER_SEED).shuffle(out)
    return out, sources


def variants(real: Sequence[Any]) -> Iterator[Any]:
    """The deterministic variants of :data:`VARIANT_RULE`, endless (each distinct from every real one)."""
    from es_plugin_bridge.data.types import Question

    bodied = [q for q in real if q.body.strip()]
    random.Random(ORDER_SEED + 1).shuffle(bodied)
    taken = {text_key(q.title, q.body) for q in real}
    n, size = 0, len(real)
    while True:
        i = n % size
        title, body = real[i].title, bodied[(i + n // size) % len(bodied)].body
        key = text_key(title, body)
        if key not in taken:
            taken.add(key)
            yield Question(f"v-{n}", title, body)
        n += 1


def rung_questions(real: Sequence[Any], count: int) -> tuple[list[Any], int]:
    """The rung's ``count`` questions (the real ones first) and how many of them are real."""
    taken = list(real[:count])
    if len(taken) < count:
        made = variants(real)
        taken += [next(made) for _ in range(count - len(taken))]
    return taken, min(count, len(real))


def write_jsonl(questions: Sequence[Any], path: Path) -> None:
    """One ``{"id", "title", "body"}`` object a line: what ``esrerank es index jsonl:FILE`` reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for q in questions:
            out.write(json.dumps({"id": q.id, "title": q.title, "body": q.body}) + "\n")


# -- model ----------------------------------------------------------------------------------------------
def esrerank(*args: str) -> float:
    """Run ``esrerank ARGS``; its seconds. Exits with its stderr when it fails."""
    exe = str(Path(sys.executable).with_name("esrerank"))
    t0 = time.perf_counter()
    done = subprocess.run([exe, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"esrerank {' '.join(args)} failed: {done.stderr[-3000:]}")
    return round(time.perf_counter() - t0, 1)


def default_model() -> tuple[Path, dict[str, Any]]:
    """The BOW-CNN export (trained and exported once, reused after), and how it was made."""
    base = BUILD / "scale-models"
    out, record = base / "bow-cnn", base / "bow-cnn.training.json"
    if (out / "manifest.json").is_file() and record.is_file():
        return out, json.loads(record.read_text())
    say(None, f"training the default BOW-CNN for {TRAIN_SECONDS} s, then exporting it to {out}")
    base.mkdir(parents=True, exist_ok=True)
    folder = SHARED / "askubuntu-pairs"
    titles = (folder if folder.is_dir() else SAMPLES / "askubuntu-pairs") / "train_titles.tsv"
    lines = titles.read_text(encoding="utf-8").splitlines(keepends=True)
    train, dev = base / "train.tsv", base / "dev.tsv"
    train.write_text("".join(lines[:20000]), encoding="utf-8")
    dev.write_text("".join(lines[20000:]), encoding="utf-8")
    checkpoint = base / "bow-cnn-checkpoint"
    train_args = ["train", "--model-type", "bow-cnn", "--train", f"pairs:{train}", "--dev", f"pairs:{dev}",
                  "--out", str(checkpoint), "--time-budget", str(TRAIN_SECONDS), "--max-dev-queries", "200",
                  "--quiet"]
    train_seconds = esrerank(*train_args)
    export_args = ["export-onnx", str(checkpoint), "--out", str(out), "--force", "--quiet"]
    export_seconds = esrerank(*export_args)
    history_file = checkpoint / "history.json"
    history = json.loads(history_file.read_text()) if history_file.is_file() else None
    made = {"train_command": " ".join(["esrerank", *train_args]).replace(str(ROOT) + "/", ""),
            "export_command": " ".join(["esrerank", *export_args]).replace(str(ROOT) + "/", ""),
            "train_seconds": train_seconds, "export_seconds": export_seconds,
            "data": f"{titles.relative_to(ROOT.parent)}: lines 1-20,000 train, the rest dev",
            "why": "the project's default bow-cnn recipe for a short budget: this benchmark measures cost, "
                   "not quality", "history": history}
    record.write_text(json.dumps(made, indent=2) + "\n")
    return out, made


def model_info(path: Path) -> dict[str, Any]:
    """The model's name, type, vector dimension and similarity (its config), and its manifest's sha256."""
    config = json.loads((path / "config.json").read_text())
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return {"path": str(shown), "name": path.name, "type": config.get("model_type"),
            "dimension": config.get("dimension"), "similarity": config.get("similarity"),
            "quantized": config.get("quantized"),
            "manifest_sha256": hashlib.sha256((path / "manifest.json").read_bytes()).hexdigest()}


# -- the node's REST API --------------------------------------------------------------------------------
def rest(url: str, method: str = "GET", body: Any = None, timeout: float = 3600.0) -> Any:
    """One JSON request to the node; its decoded answer. Raises RuntimeError with the node's words."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {url}: {exc.code} {exc.read()[:500]!r}") from None


def store_bytes(es: str, index: str, data: Sequence[Path]) -> int:
    """The bytes of the index's folders on disk (``DATA/nodes/0/indices/UUID`` of every node: on a
    cluster, every copy) after a refresh and a flush. (Not ``_cat/indices``' store size: the node caches
    it for ``index.store.stats_refresh_interval``, 10 s, so right after a merge it still says what was
    there before.)"""
    rest(f"{es}/{index}/_refresh", "POST")
    rest(f"{es}/{index}/_flush", "POST")
    uuid = rest(f"{es}/_cat/indices/{index}?format=json&h=uuid")[0]["uuid"]
    total = 0
    for path in (p for folder in data for p in (folder / "nodes" / "0" / "indices" / uuid).rglob("*")):
        with contextlib.suppress(FileNotFoundError):  # a merge may delete a file meanwhile
            total += path.stat().st_size if path.is_file() else 0
    if total == 0:
        sys.exit(f"no files of index {index} ({uuid}) under {data}")
    return total


def heap_used(es: str, pids: Sequence[int], samples: int = 3) -> dict[str, Any]:
    """The nodes' heap in use (summed over the cluster's nodes) right after a full GC of each (``jcmd PID
    GC.run``, where the JDK has jcmd): the least and most of ``samples`` readings of ``_nodes/stats/jvm``
    a second apart."""
    collected = shutil.which("jcmd") is not None and all(subprocess.run(
        ["jcmd", str(pid), "GC.run"], capture_output=True, timeout=120).returncode == 0 for pid in pids)
    seen = []
    for i in range(samples):
        nodes = rest(f"{es}/_nodes/stats/jvm")["nodes"]
        seen.append(sum(n["jvm"]["mem"]["heap_used_in_bytes"] for n in nodes.values()))
        if i + 1 < samples:
            time.sleep(1.0)
    return {"min": min(seen), "max": max(seen), "after_full_gc": collected}


def segments(es: str, index: str) -> dict[str, Any]:
    """The index's primary segments: count and the memory OpenSearch reports for them."""
    seg = rest(f"{es}/{index}/_stats/segments")["indices"][index]["primaries"]["segments"]
    return {k: seg[k] for k in ("count", "memory_in_bytes") if k in seg}


def forcemerge(es: str, index: str) -> float:
    """``_forcemerge?max_num_segments=1`` (waits for it), then a refresh: its seconds."""
    t0 = time.perf_counter()
    rest(f"{es}/{index}/_forcemerge?max_num_segments=1", "POST", timeout=6 * 3600.0)
    rest(f"{es}/{index}/_refresh", "POST")
    return round(time.perf_counter() - t0, 2)


def per_1000(value: float, count: int) -> float:
    return round(value * 1000 / count, 1)


# -- indexing -------------------------------------------------------------------------------------------
def index_timed(model: Path, sidecar: FreshSidecar, es: str, name: str, questions: Sequence[Any],
                batch_size: int, es_timeout: float, after_setup: Callable[[], Any] = lambda: None,
                layout: Sequence[str] = ()) -> dict[str, Any]:
    """``es setup`` (flags of :data:`INDEXES`), ``after_setup()``, then ``es index``'s run in this
    process, timed."""
    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
    from es_plugin_bridge.elastic.cluster.connection import Connection
    from es_plugin_bridge.elastic.indexing import index_run

    index, flags = INDEXES[name]
    if name != "text_only" or sidecar.proc is None:
        sidecar.restart()  # an empty encoding cache for every embedding run
    setup(model, index, [*flags, *layout], es, sidecar.url)
    after_setup()
    client = Connection(url=es, timeout=es_timeout).client()
    requests = sidecar.embed_requests()
    load = load_average()
    t0 = time.perf_counter()
    target = SidecarTarget(sidecar.url, timeout=600.0)
    run = index_run(client, index, questions, target, batch_size=batch_size, resume=False, max_retries=5,
                    progress=len(questions) >= 50_000)
    seconds = time.perf_counter() - t0
    if run.error:
        sys.exit(f"es index into {index} failed: {run.error}")
    return {"index": index, "es_setup_flags": [*flags, *layout], "questions": run.report.indexed,
            "seconds": round(seconds, 2), "questions_per_second": round(run.report.indexed / seconds, 1),
            "encode_requests": sidecar.embed_requests() - requests, "load_average_before": load}


def encoder_alone(sidecar: FreshSidecar, questions: Sequence[Any], batch_size: int) -> dict[str, Any]:
    """The sidecar's own speed on the rung's texts: every batch of ``batch_size`` questions embedded, one
    after the other, by the very call ``es index`` makes (``SidecarClient.embed``), on a fresh sidecar
    (an empty encoding cache, as each indexing run gets), nothing stored."""
    from es_plugin_bridge.bridge.sidecar_client import SidecarClient
    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget

    sidecar.restart()
    embedder = SidecarClient.reaching(SidecarTarget(sidecar.url, timeout=600.0), timeout=600.0)
    embedder.ready()
    load = load_average()
    t0 = time.perf_counter()
    for start in range(0, len(questions), batch_size):
        embedder.embed(questions[start:start + batch_size])
    seconds = time.perf_counter() - t0
    return {"questions": len(questions), "batch_size": batch_size, "seconds": round(seconds, 2),
            "questions_per_second": round(len(questions) / seconds, 1), "load_average_before": load,
            "what": "SidecarClient.embed (es index's call) on every batch in turn, nothing indexed"}


def embed_once(model: Path, sidecar: FreshSidecar, es: str, data: Path, questions: Sequence[Any],
               batch_size: int, es_timeout: float, layout: Sequence[str] = ()) -> dict[str, Any]:
    """``esrerank embed`` of the rung's JSONL into a vectors file, then ``es index --vectors`` of it with
    the sidecar stopped (the run names a URL where nothing listens), timed each; the index is dropped."""
    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
    from es_plugin_bridge.elastic.cluster.connection import Connection
    from es_plugin_bridge.elastic.indexing import index_run
    from es_plugin_bridge.local_http import free_port

    out = BUILD / "scale" / f"vectors-{len(questions)}.gz"
    embed_args = ["embed", f"jsonl:{data}", "--model", str(model), "--out", str(out), "--no-progress"]
    embed_seconds = esrerank(*embed_args)
    index = "scale-file"
    sidecar.restart()
    setup(model, index, list(layout), es, sidecar.url)
    sidecar.stop()
    client = Connection(url=es, timeout=es_timeout).client()
    nobody = SidecarTarget(f"http://127.0.0.1:{free_port()}", timeout=5.0)
    load = load_average()
    t0 = time.perf_counter()
    run = index_run(client, index, questions, nobody, batch_size=batch_size, resume=False, max_retries=5,
                    progress=len(questions) >= 50_000, vectors=out)
    seconds = time.perf_counter() - t0
    if run.error:
        sys.exit(f"es index --vectors into {index} failed: {run.error}")
    first = es.split(",")[0]
    stored = rest(f"{first}/{index}/_count")["count"]
    rest(f"{first}/{index}", "DELETE")
    return {"embed_command": " ".join(["esrerank", *embed_args]).replace(str(ROOT) + "/", ""),
            "embed_seconds": embed_seconds,
            "embed_questions_per_second": round(len(questions) / embed_seconds, 1),
            "file_bytes": out.stat().st_size, "index_seconds": round(seconds, 2),
            "index_questions_per_second": round(run.report.indexed / seconds, 1), "stored": stored,
            "sidecar_running": False, "load_average_before": load}


def twin(es: str, source: str, name: str, graph: bool) -> None:
    """A copy of ``source``'s settings and mapping, one shard, no replica; ``graph`` False: the vector as
    the flat ``knn_vector`` (no ``method``, no ``index.knn``: no HNSW graph)."""
    mappings = rest(f"{es}/{source}/_mapping")[source]["mappings"]
    settings = rest(f"{es}/{source}/_settings")[source]["settings"]["index"]
    kept = {k: settings[k] for k in ("number_of_shards", "similarity", "analysis") if k in settings}
    kept["number_of_replicas"] = 0
    vector = mappings["properties"]["vector"]
    if graph:
        kept["knn"] = True
    else:
        mappings["properties"]["vector"] = {"type": "knn_vector", "dimension": vector["dimension"]}
    rest(f"{es}/{name}", "PUT", {"settings": {"index": kept}, "mappings": mappings})


def reindex(es: str, source: str, dest: str, count: int) -> float:
    """``_reindex`` ``source`` into ``dest`` as a task, polled to its end, then a refresh: its seconds."""
    t0 = time.perf_counter()
    task = rest(f"{es}/_reindex?wait_for_completion=false", "POST",
                {"source": {"index": source, "size": 500}, "dest": {"index": dest}})["task"]
    while True:
        state = rest(f"{es}/_tasks/{task}")
        if state.get("completed"):
            break
        time.sleep(0.5)
    rest(f"{es}/{dest}/_refresh", "POST")
    seconds = round(time.perf_counter() - t0, 2)
    done = state.get("response", {})
    if state.get("error") or done.get("failures") or done.get("created") != count:
        sys.exit(f"_reindex {source} → {dest} failed: {json.dumps(state)[:2000]}")
    return seconds


def hnsw_build(es: str, count: int, data: Sequence[Path]) -> dict[str, Any]:
    """The graph's cost: the serving index copied with and without it (reindex + forcemerge each)."""
    out: dict[str, Any] = {}
    for name, graph in (("flat", False), ("hnsw", True)):
        index = f"scale-twin-{name}"
        twin(es, SERVING_INDEX, index, graph)
        load = load_average()
        copied = reindex(es, SERVING_INDEX, index, count)
        merged = forcemerge(es, index)
        out[name] = {"reindex_seconds": copied, "forcemerge_seconds": merged,
                     "store_bytes_merged": store_bytes(es, index, data), "load_average_before": load}
        rest(f"{es}/{index}", "DELETE")
    flat, hnsw = out["flat"], out["hnsw"]
    out["seconds"] = round(hnsw["reindex_seconds"] + hnsw["forcemerge_seconds"]
                           - flat["reindex_seconds"] - flat["forcemerge_seconds"], 2)
    out["forcemerge_difference_seconds"] = round(hnsw["forcemerge_seconds"] - flat["forcemerge_seconds"], 2)
    out["graph_bytes_per_1000"] = per_1000(hnsw["store_bytes_merged"] - flat["store_bytes_merged"], count)
    out["what"] = ("the serving index _reindex-ed inside the node into a copy of its mapping (lucene HNSW, "
                   "index.knn) and into the same with the flat knn_vector (no graph), each then "
                   "_forcemerge-d to one segment; seconds = (reindex + forcemerge) with HNSW minus without")
    return out


# -- latency --------------------------------------------------------------------------------------------
def open_system(es: str, sidecar_url: str, mode: str | None, knn: str, window: int,
                es_timeout: float) -> Callable[[Any], Any]:
    """One client's search function for a system of :data:`SYSTEMS` (its own connection and mode)."""
    from es_plugin_bridge.bridge.sidecar_target import SidecarTarget
    from es_plugin_bridge.elastic.cluster.connection import Connection
    from es_plugin_bridge.elastic.modes.factory import open_mode

    cluster = Connection(url=es, timeout=es_timeout).open()
    searcher = open_mode(cluster, SERVING_INDEX, mode or "bridge", "bm25", window=window,
                         sidecar=SidecarTarget(sidecar_url, None, 10.0), knn=knn)
    if mode is None:
        return lambda q: searcher.stage.search(q, 10)
    return lambda q: searcher.search(q, 10)


def percentiles(ms: Sequence[float]) -> dict[str, float | None]:
    if not ms:
        return {"p50": None, "p95": None, "p99": None}
    a = np.asarray(ms)
    return {f"p{p}": round(float(np.percentile(a, p)), 2) for p in (50, 95, 99)}


def run_load(searches: Sequence[Callable[[Any], Any]], queries: Sequence[Any], max_searches: int,
             seconds: float) -> dict[str, Any]:
    """One thread per search function, each taking queries in turn (from its own offset) until
    ``max_searches`` in all or ``seconds`` have passed; the latencies of those that answered."""
    lock = threading.Lock()
    budget = [max_searches]
    times: list[float] = []
    failures: list[str] = []
    not_reranked = [0]
    stop_at = time.monotonic() + seconds

    def client(k: int, search: Callable[[Any], Any]) -> None:
        turn = k * len(queries) // len(searches)
        while time.monotonic() < stop_at:
            with lock:
                if budget[0] <= 0:
                    return
                budget[0] -= 1
            query = queries[turn % len(queries)]
            turn += 1
            t0 = time.perf_counter()
            try:
                result = search(query)
            except Exception as exc:  # noqa: BLE001 - counted and named in the JSON
                with lock:
                    failures.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            ms = 1000 * (time.perf_counter() - t0)
            with lock:
                times.append(ms)
                not_reranked[0] += getattr(result, "reranked", True) is False

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k, s), daemon=True) for k, s in enumerate(searches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 300)
    wall = time.perf_counter() - t0
    return {**percentiles(times), "n": len(times), "errors": len(failures), "not_reranked": not_reranked[0],
            "searches_per_second": round(len(times) / wall, 2), "wall_seconds": round(wall, 2),
            "error_lines": sorted(set(failures))[:3]}


def latency(es: str, sidecar_url: str, titles: Sequence[str], args: argparse.Namespace,
            rung: int) -> dict[str, Any]:
    """Every system of :data:`SYSTEMS` at every ``--clients`` count, the systems in turn."""
    from es_plugin_bridge.data.questions import question_from_text

    queries = [question_from_text(t) for t in titles[:args.queries]]
    warmup = [question_from_text(t) for t in titles[len(titles) - args.warmup:]]
    out: dict[str, dict[str, Any]] = {name: {} for name, _, _ in SYSTEMS}
    for _, mode, knn in SYSTEMS:
        first = open_system(es, sidecar_url, mode, knn, args.window, args.es_timeout)
        for query in warmup:
            with contextlib.suppress(Exception):  # the measured loads count failures
                first(query)
    for clients in args.clients:
        for name, mode, knn in SYSTEMS:
            say(rung, f"latency: {name} at {clients} client{'s' * (clients != 1)}")
            searches = [open_system(es, sidecar_url, mode, knn, args.window, args.es_timeout)
                        for _ in range(clients)]
            load = load_average()
            out[name][str(clients)] = {**run_load(searches, queries, args.max_searches or args.queries,
                                                  args.seconds_per_load), "load_average_before": load}
    return out


# -- one rung -------------------------------------------------------------------------------------------
def run_rung(rung: dict[str, Any], real: Sequence[Any], titles: Sequence[str], model: Path, port: int,
             args: argparse.Namespace, home: Path, save: Callable[[], None]) -> None:
    """Every measure of one rung on a fresh node (or cluster: ``--nodes``) into ``rung``, filled as it
    goes and saved (``save()``) before each phase: a rung that fails or is stopped keeps what it
    measured. The HNSW twins come last: the longest phase, and no serving figure needs them."""
    from es_plugin_bridge.opensearch_node import cluster, node

    t_rung = time.perf_counter()
    count = rung["questions"]

    def phase(text: str) -> None:
        rung["seconds"] = round(time.perf_counter() - t_rung, 1)
        save()
        say(count, text)

    phase("building the questions")
    questions, n_real = rung_questions(real, count)
    rung.update(real=n_real, variants=count - n_real)
    data_file = BUILD / "scale" / f"questions-{count}.jsonl"
    write_jsonl(questions, data_file)
    rung["data_file"] = str(data_file.relative_to(ROOT))
    run_dir = BUILD / "opensearch" / "bench-scale"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    phase(f"starting OpenSearch ({args.nodes} node{'s' * (args.nodes > 1)}, heap {args.heap} each)")
    if args.nodes == 1:
        nodes = [node.start(home, run_dir, heap=args.heap, timeout=300)]
    else:
        nodes = cluster.start_cluster(home, run_dir, count=args.nodes, heap=args.heap, timeout=600)
    layout = layout_flags(args)
    pids = [n.pid for n in nodes]
    sidecar = FreshSidecar(model, port, [])
    try:
        # es: the first node, for the benchmark's own requests; urls: every node, for es setup, es index and
        # the searches (the client spreads its requests over them)
        es, urls, data = nodes[0].url, ",".join(n.url for n in nodes), [n.run_dir / "data" for n in nodes]
        heap = {"node_started": heap_used(es, pids)}
        indexing: dict[str, Any] = {}
        sample = questions[:args.rate_sample] if args.rate_sample else questions
        phase(f"the encoder alone on {len(sample):,} questions: es index's embedding calls, nothing indexed")
        rung["encoder_alone"] = encoder_alone(sidecar, sample, args.batch_size)
        phase("indexing with client embedding")
        indexing["client_embedding"] = index_timed(
            model, sidecar, urls, "client_embedding", questions, args.batch_size, args.es_timeout,
            after_setup=lambda: heap.update(client_index_set_up=heap_used(es, pids)), layout=layout)
        disk = {"client_embedding": store_bytes(es, SERVING_INDEX, data)}
        heap["client_index_built"] = heap_used(es, pids)
        seg = {"client_embedding": segments(es, SERVING_INDEX)}
        phase("forcemerge of the client-embedded index")
        rung["client_forcemerge_seconds"] = forcemerge(es, SERVING_INDEX)
        disk["client_embedding_merged"] = store_bytes(es, SERVING_INDEX, data)
        heap["client_index_merged"] = heap_used(es, pids)
        seg["client_embedding_merged"] = segments(es, SERVING_INDEX)
        phase("indexing the text only")
        indexing["text_only"] = index_timed(model, sidecar, urls, "text_only", questions, args.batch_size,
                                            args.es_timeout, layout=layout)
        disk["text_only"] = store_bytes(es, INDEXES["text_only"][0], data)
        rest(f"{es}/{INDEXES['text_only'][0]}", "DELETE")
        encoder_rate = rung["encoder_alone"]["questions_per_second"]
        rung["client_embedding_of_encoder"] = round(
            indexing["client_embedding"]["questions_per_second"] / encoder_rate, 3)
        phase(f"embed once on {len(sample):,} questions: esrerank embed, then es index --vectors with the "
              "sidecar stopped")
        sample_file = data_file
        if len(sample) < count:
            sample_file = BUILD / "scale" / f"questions-{count}-first-{len(sample)}.jsonl"
            write_jsonl(sample, sample_file)
        rung["embed_once"] = embed_once(model, sidecar, urls, sample_file, sample, args.batch_size,
                                        args.es_timeout, layout)
        if args.skip_ingest:
            indexing["ingest_embedding"] = {"skipped": True}
        else:
            limit = min(count, args.ingest_limit or count)
            phase(f"indexing with ingest embedding ({limit:,} questions)")
            indexing["ingest_embedding"] = index_timed(model, sidecar, urls, "ingest_embedding",
                                                       questions[:limit], args.batch_size, args.es_timeout,
                                                       layout=layout)
            disk["ingest_embedding"] = store_bytes(es, INDEXES["ingest_embedding"][0], data)
            rest(f"{es}/{INDEXES['ingest_embedding'][0]}", "DELETE")
        rung["indexing"] = indexing
        counts = {name: run.get("questions", count) for name, run in indexing.items()}
        rung["disk_bytes"] = disk
        rung["disk_bytes_per_1000"] = {name: per_1000(b, counts.get(name.removesuffix("_merged"), count))
                                       for name, b in disk.items()}
        rung["heap_used_bytes"] = heap
        base = heap["client_index_set_up"]["min"]
        rung["heap_bytes_per_1000"] = {name: per_1000(heap[name]["min"] - base, count)
                                       for name in ("client_index_built", "client_index_merged")}
        rung["segments"] = seg
        phase("latency: a sidecar without encoding cache, the request cache off")
        rest(f"{es}/{SERVING_INDEX}/_settings", "PUT", {"index": {"requests.cache.enable": False}})
        sidecar.options = ["--cache-size", "0"]
        sidecar.restart()
        rung["latency_ms"] = latency(urls, sidecar.url, titles, args, count)
        sidecar.stop()
        if args.skip_hnsw:
            rung["hnsw"] = {"skipped": True}
        else:
            phase("HNSW graph: reindex with and without it")
            rung["hnsw"] = hnsw_build(es, count, data)
            rung["hnsw_build_seconds"] = rung["hnsw"]["seconds"]
        rung["finished"] = True
    finally:
        sidecar.stop()
        for started in nodes:
            node.stop(started)
        shutil.rmtree(run_dir, ignore_errors=True)
        rung["load_average"]["end"] = load_average()
        rung["seconds"] = round(time.perf_counter() - t_rung, 1)


def layout_flags(args: argparse.Namespace) -> list[str]:
    """``es setup``'s ``--shards``/``--replicas`` for every index of a rung (none on one node: its
    defaults, one shard, no replica, as the single-node rungs were measured)."""
    if args.nodes == 1 and args.shards is None and args.replicas is None:
        return []
    shards = args.shards if args.shards is not None else args.nodes
    replicas = args.replicas if args.replicas is not None else min(1, args.nodes - 1)
    return ["--shards", str(shards), "--replicas", str(replicas)]


def headline(rung: dict[str, Any]) -> dict[str, Any]:
    """The rung's figures in a few lines, for the console."""
    p50 = {name: {c: v["p50"] for c, v in by.items()} for name, by in rung.get("latency_ms", {}).items()}
    rate = {name: run.get("questions_per_second") for name, run in rung.get("indexing", {}).items()}
    return {"questions": rung["questions"], "questions_per_second": rate,
            "disk_bytes_per_1000": rung.get("disk_bytes_per_1000"),
            "heap_bytes_per_1000": rung.get("heap_bytes_per_1000"),
            "hnsw_build_seconds": rung.get("hnsw_build_seconds"), "p50_ms": p50}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ints = lambda text: [int(x) for x in text.split(",") if x.strip()]  # noqa: E731
    parser.add_argument("--rungs", type=ints, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200, help="Held-out AskUbuntu titles searched.")
    parser.add_argument("--warmup", type=int, default=5, help="Searches per system before the loads.")
    parser.add_argument("--clients", type=ints, default=[1, 8], help="Concurrent clients of each load.")
    parser.add_argument("--seconds-per-load", type=float, default=60.0, help="Most seconds of one load.")
    parser.add_argument("--max-searches", type=int, default=None,
                        help="Most searches of one load, all clients together (default: --queries).")
    parser.add_argument("--window", type=int, default=100, help="First-stage hits reranked (es search's).")
    parser.add_argument("--model", type=Path, default=None,
                        help="An export-onnx directory for every rung (default: the BOW-CNN made here).")
    parser.add_argument("--rung-model", action="append", default=[], metavar="N=DIR",
                        help="Another model for rung N (repeatable).")
    parser.add_argument("--heap", default="2g", help="Each node's JVM heap (-Xms and -Xmx).")
    parser.add_argument("--nodes", type=int, default=1,
                        help="Nodes of the fresh cluster each rung runs on (opensearch_node/cluster.py).")
    parser.add_argument("--shards", type=int, default=None, help="es setup --shards (default: --nodes).")
    parser.add_argument("--replicas", type=int, default=None,
                        help="es setup --replicas (default: 1 on several nodes, 0 on one).")
    parser.add_argument("--batch-size", type=int, default=200, help="es index's batch size.")
    parser.add_argument("--es-timeout", type=float, default=120.0, help="Seconds per OpenSearch request.")
    parser.add_argument("--skip-ingest", action="store_true", help="No ingest-embedding indexing run.")
    parser.add_argument("--ingest-limit", type=int, default=0,
                        help="Time the ingest embedding on the rung's first N questions (0: all).")
    parser.add_argument("--rate-sample", type=int, default=0,
                        help="Time the encoder alone and embed once on a rung's first N questions (0: all).")
    parser.add_argument("--skip-hnsw", action="store_true",
                        help="No HNSW twins (reindex with and without the graph).")
    parser.add_argument("--append", action="store_true",
                        help="Keep --out's rungs of other sizes; this run's rungs replace those of theirs.")
    parser.add_argument("--out", type=Path, default=HERE / "scale.json")
    args = parser.parse_args()
    args.rungs = sorted(args.rungs)
    if args.queries + args.warmup > HELD_OUT:
        parser.error(f"--queries + --warmup must be at most {HELD_OUT}")
    return args


def this_command() -> str:
    return " ".join(["python", "benchmarks/scale.py", *sys.argv[1:]])


def appended(out: Path, report: dict[str, Any]) -> dict[str, Any]:
    """``--append``: ``out``'s report, its rungs kept (those this run measures again are replaced), this
    run's machine, settings and command recorded under ``appended_runs`` (each new rung names its own
    command); a run of another layout or node heap is refused, as its rungs would not compare."""
    try:
        old = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        sys.exit(f"--append: cannot read {out}: {exc}")
    for key in ("nodes", "es_setup_layout", "heap", "latency_setup"):
        if old.get(key, report.get(key)) != report.get(key):
            sys.exit(f"--append: {out} was measured with {key} {old.get(key)!r}, this run has "
                     f"{report.get(key)!r}; write another --out")
    run = {k: v for k, v in report.items() if k != "rungs"}
    old.setdefault("appended_runs", []).append(run)
    old.setdefault("models_by_rung", {}).update(report["models_by_rung"])
    return old


def main() -> None:
    args = parse_args()
    from es_plugin_bridge.local_http import free_port
    from es_plugin_bridge.opensearch_node import layout

    if args.model is None:
        model, made = default_model()
    else:
        model, made = args.model.resolve(), None
    by_rung = {int(k): Path(v).resolve() for k, v in (item.split("=", 1) for item in args.rung_model)}
    models = {rung: by_rung.get(rung, model) for rung in args.rungs}
    home = layout.assemble(layout.default_home(ROOT))
    say(None, "reading every real question")
    titles = held_out_titles()
    real, sources = real_questions(set(titles))
    where = ("a fresh single node per rung" if args.nodes == 1
             else f"a fresh cluster of {args.nodes} nodes per rung (all on this machine)")
    report = machine(
        node=f"OpenSearch {layout.SERVER_VERSION} assembled from Maven Central, {where}, {args.heap} heap "
             f"each, on this machine", heap=args.heap)
    report["nodes"] = args.nodes
    report["es_setup_layout"] = layout_flags(args) or "es setup's defaults (one shard, no replica)"
    report["command"] = this_command()
    report["model"] = {**model_info(model), "made_here": made}
    report["models_by_rung"] = {str(rung): model_info(path) for rung, path in models.items()}
    report["texts"] = {
        "real_distinct": len(real), "bodied_real": sum(1 for q in real if q.body.strip()), "by_file": sources,
        "held_out_titles": HELD_OUT,
        "order": f"random.Random({ORDER_SEED}) shuffle of every real question; a rung takes the first N",
        "variant_rule": VARIANT_RULE}
    report["sidecar"] = {"indexing": "esrerank serve MODEL (default cache, started anew per embedding run)",
                         "latency": "esrerank serve MODEL --cache-size 0", "timeout_seconds": 10.0}
    report["request_cache"] = ("PUT /scale-client/_settings {\"index\": {\"requests.cache.enable\": false}} "
                               "before the loads (by default it caches size-0 searches only anyway)")
    report["latency_setup"] = {"queries": args.queries, "warmup": args.warmup, "clients": args.clients,
                               "seconds_per_load": args.seconds_per_load,
                               "max_searches_per_load": args.max_searches or args.queries,
                               "window": args.window, "top": 10, "index": "client_embedding, merged"}
    report["rate_sample"] = args.rate_sample or "every question of the rung"
    report["rungs"] = []
    if args.append:
        report = appended(args.out, report)
    port = free_port()

    def save() -> None:
        report["rungs"].sort(key=lambda r: r["questions"])
        args.out.write_text(json.dumps(report, indent=2) + "\n")

    for count in args.rungs:
        say(count, f"start (model {models[count].name})")
        rung: dict[str, Any] = {"questions": count, "finished": False, "model": models[count].name,
                                "command": this_command(),
                                "rate_sample": args.rate_sample or None,
                                "load_average": {"start": load_average()}}
        report["rungs"] = [r for r in report["rungs"] if r["questions"] != count] + [rung]
        try:
            run_rung(rung, real, titles, models[count], port, args, home, save)
        finally:
            report["load_average_at_end"] = load_average()
            save()
        say(count, f"done in {rung['seconds']:.0f} s: {args.out}")
        print(json.dumps(headline(rung), indent=2), flush=True)


if __name__ == "__main__":
    main()
