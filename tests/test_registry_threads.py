"""Every registry is safe from many threads from the first lookup on.

A registry imports its package on the first lookup. It used to mark itself loaded before importing, so
a second thread looking up at that moment saw an empty table: ``unknown mode 'rerank' (known: )``, for
7 of 8 threads in 4 of 5 fresh processes. Only a fresh process has an unloaded registry, so each round
is its own interpreter: 16 threads released together by a barrier look up one entry of each registry.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = r"""
import sys, threading
from es_plugin_bridge.elastic.modes import mode_spec
from es_plugin_bridge.engines.registry import engine_names
from es_plugin_bridge.rankers import available

THREADS = 16
barrier = threading.Barrier(THREADS)
failures = []

def look_up():
    barrier.wait()
    try:
        assert mode_spec("rerank").ranker == "model"
        assert "opensearch" in engine_names()
        assert "fused" in available()
    except Exception as exc:  # reported below, one line a thread
        failures.append(f"{type(exc).__name__}: {exc}")

threads = [threading.Thread(target=look_up) for _ in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\n".join(failures))
sys.exit(1 if failures else 0)
"""

ROUNDS = 20


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_sixteen_threads_look_up_at_once_in_a_fresh_process(round_):
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"round {round_}: {done.stdout}{done.stderr[-2000:]}"
