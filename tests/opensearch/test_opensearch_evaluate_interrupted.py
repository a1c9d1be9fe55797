"""An ``es evaluate`` run stopped midway (Ctrl-C, SIGTERM) removes its throw-away ``esrerank-eval-*`` index
from the node (issue 34, item 9), and one whose removal fails says which index remains and the request
that removes it (``elastic/run_cleanup.py``, ``cli/interrupts.py``).

The run is the real command in a subprocess, on SemEval's dev questions, against the real node and the
live sidecar behind a proxy that slows each POST (:func:`slowed`) so that the run is still reranking
when the signal comes. Python's default for SIGTERM ends the process running no ``finally``:
that, and nothing else, is what left the index behind before.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from es_commands import SEMEVAL_DEV, common, ctrl_c_reaches_it
from recording_proxy import recording

pytestmark = [pytest.mark.engine, pytest.mark.slow]


class Slowed:
    """A proxy's URL, and ``reranking``: set at its first ``/v1/rerank`` (the index is then whole)."""

    def __init__(self) -> None:
        self.url = ""
        self.reranking = threading.Event()


@contextlib.contextmanager
def slowed(target: str, delay: float) -> Iterator[Slowed]:
    """A proxy to ``target`` that forwards GETs at once (``/readyz``) and each POST after ``delay`` s."""
    seen = Slowed()

    def before(method: str, path: str) -> None:
        if method == "POST":
            if path.split("?")[0].endswith("/v1/rerank"):
                seen.reranking.set()
            time.sleep(delay)

    with recording(target, before) as proxy:
        seen.url = proxy.url
        yield seen


def _eval_indices(opensearch) -> set[str]:
    status, answer = opensearch.call("GET", "/_cat/indices/esrerank-eval-*?format=json")
    assert status == 200, answer
    return {row["index"] for row in answer}


def _start(opensearch, sidecar, proxy: str) -> subprocess.Popen:
    _, model = sidecar
    argv = [str(Path(sys.executable).with_name("esrerank")), "es", "evaluate", "--task", "rerank",
            "--data", f"semeval:{SEMEVAL_DEV}", "--rankers", "bm25,fused", "--model", str(model),
            "--first-stage", "bm25", "--mode", "bridge", "--no-results-index", "--no-progress",
            *common(opensearch, proxy)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ctrl_c_reaches_it)


def _wait_for_reranking(opensearch, process: subprocess.Popen, proxy: Slowed, before: set[str]) -> str:
    """The run's index, once the run reranks its first query (its index is then whole)."""
    deadline = time.monotonic() + 120
    while not proxy.reranking.wait(0.1):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the run did not start reranking within 120 s"
    (index,) = _eval_indices(opensearch) - before
    return index


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_run_leaves_no_index_behind(opensearch, sidecar, signum):
    before = _eval_indices(opensearch)
    with slowed(sidecar[0], 0.3) as proxy:
        process = _start(opensearch, sidecar, proxy.url)
        index = _wait_for_reranking(opensearch, process, proxy, before)
        time.sleep(1.0)  # well into the reranking
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "aborted"
    assert index not in _eval_indices(opensearch)
    assert _eval_indices(opensearch) == before


def test_an_index_that_cannot_be_removed_is_named_with_the_request_that_removes_it(opensearch, sidecar):
    """``index.blocks.metadata`` makes the node refuse to delete the index (a cluster block, 403:
    OpenSearch's ``MetadataDeleteIndexService`` checks the index's METADATA_WRITE block)."""
    before = _eval_indices(opensearch)
    with slowed(sidecar[0], 0.3) as proxy:
        process = _start(opensearch, sidecar, proxy.url)
        index = _wait_for_reranking(opensearch, process, proxy, before)
        opensearch.ok("PUT", f"/{index}/_settings", {"index.blocks.metadata": True})
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    opensearch.ok("PUT", f"/{index}/_settings", {"index.blocks.metadata": False})
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in err
    warning = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, err
    assert warning[0].startswith(f"warning: index {index} may remain on the cluster (")
    assert warning[0].endswith(f"remove it with: curl -X DELETE '{opensearch.url}/{index}'")
    assert index in _eval_indices(opensearch)  # it did remain, as said
    opensearch.ok("DELETE", f"/{index}")  # the request the warning gives
    assert _eval_indices(opensearch) == before
