"""One direction of imports: training → core ← serving, exporters → core. The core imports neither
training, serving nor exporters; serving imports the core, the text pipeline and onnxruntime only; and
importing the sidecar app and answering requests loads none of the training stack."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from es_plugin_bridge.local_http import NotReady, free_port, wait_until_ready

PACKAGE = Path(__file__).resolve().parents[1] / "es_plugin_bridge"
HEAVY = ("torch", "gensim", "sklearn", "matplotlib", "ir_measures", "bm25s", "scipy", "elasticsearch",
         "safetensors")
#: Parts of the product serving must not import (directly or through the core).
NOT_SERVING = ("training", "evaluation", "rankers", "engines", "models", "baselines", "elastic", "bridge",
               "cli", "kibana")
STDLIB = set(sys.stdlib_module_names)


def _imports(path: Path) -> set[str]:
    """Absolute module names imported anywhere in ``path`` (also inside functions)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_the_core_imports_nothing_of_training_serving_or_exporters():
    files = sorted((PACKAGE / "core").glob("*.py"))
    assert {f.stem for f in files} >= {"fusion", "calibration", "vocab", "model_config", "manifest"}
    for path in files:
        for name in _imports(path):
            top = name.split(".")[0]
            ok = (top in STDLIB or top in ("numpy", "pydantic")
                  or name in ("es_plugin_bridge.errors",) or name.startswith("es_plugin_bridge.core"))
            assert ok, f"{path.name} imports {name}"


def test_serving_imports_only_the_core_the_text_pipeline_and_its_server_stack():
    allowed_third_party = {"numpy", "onnx", "onnxruntime", "flask", "werkzeug", "waitress",
                           "prometheus_client", "pydantic", "tokenizers"}
    for path in sorted((PACKAGE / "serving").glob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "es_plugin_bridge":
                part = name.split(".")[1] if "." in name else ""
                ok = part in ("", "core", "serving", "text", "data", "errors", "bearer_token",
                              "request_deadline")
                assert ok, f"{path.name} imports {name}"
            elif path.name == "scorer.py" and name.startswith("scipy"):  # evaluation adapter, lazily
                continue
            else:
                assert top in STDLIB or top in allowed_third_party, f"{path.name} imports {name}"


def test_training_and_exporters_use_the_core():
    assert "es_plugin_bridge.core.fusion" in _imports(PACKAGE / "training" / "fusion_fit.py")
    assert "es_plugin_bridge.core.vocab" in _imports(PACKAGE / "training" / "featurize.py")
    exporters = PACKAGE.parent / "exporters"
    assert "es_plugin_bridge.core.model_config" in _imports(exporters / "export.py")
    assert "es_plugin_bridge.core.manifest" in _imports(exporters / "export.py")


ANSWER = """
import json, sys
from es_plugin_bridge.serving.app import create_app

client = create_app(sys.argv[1]).test_client()
body = {"query": "how do I install ubuntu from usb", "documents": ["install ubuntu usb stick",
        {"title": "wifi drops", "body": "<p>my <b>wifi</b> drops</p>"}], "first_stage_scores": [3.0, 1.0]}
statuses = [client.post("/v1/rerank", json=body).status_code,
            client.post("/v1/rerank?score=linear", json={"query": "q", "documents": ["a", "b"]}).status_code,
            client.post("/v1/encode", json={"texts": ["a question"]}).status_code,
            client.get("/metrics").status_code]
loaded = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2].split(",")))
parts = sorted({m.split(".")[1] for m in sys.modules if m.startswith("es_plugin_bridge.")})
print(json.dumps({"statuses": statuses, "loaded": loaded, "parts": parts}))
"""


def test_importing_the_app_and_answering_loads_no_training_stack(exported):
    out = subprocess.run([sys.executable, "-c", ANSWER, str(exported["bow-cnn"]), ",".join(HEAVY)],
                         capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["statuses"] == [200, 200, 200, 200]
    assert got["loaded"] == []
    assert not set(got["parts"]) & set(NOT_SERVING), got["parts"]


BLOCKER = """
import importlib.abc, runpy, sys
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED}:
            raise ImportError(f"not installed in a serving-only install: {{name}}")
sys.meta_path.insert(0, Blocker())
sys.argv = [{PROG}] + sys.argv[1:]
runpy.run_module({MODULE}, run_name="__main__")
"""


def _serve_without_training_stack(module: str, argv: list[str]) -> tuple[int, str]:
    """Run ``module`` as __main__ with every heavy package unimportable; (status of a rerank, stderr)."""
    port = free_port()
    code = BLOCKER.format(BLOCKED=repr(set(HEAVY)), PROG=repr(module), MODULE=repr(module))
    proc = subprocess.Popen([sys.executable, "-c", code, *argv, "--port", str(port)],
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "ESRERANK_TOKEN": "tok"})
    try:
        with contextlib.suppress(NotReady):
            wait_until_ready(f"http://127.0.0.1:{port}/readyz", timeout=60, alive=lambda: proc.poll() is None)
        if proc.poll() is not None:
            return -1, proc.stderr.read()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/rerank", method="POST",
                                     data=json.dumps({"query": "q", "documents": ["a", "b"]}).encode(),
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer tok"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, ""
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_the_serve_command_runs_on_a_serving_only_install(exported):
    status, err = _serve_without_training_stack("es_plugin_bridge.cli.serve", [str(exported["gru"])])
    assert status == 200, err


@pytest.mark.slow
def test_esrerank_serve_runs_on_a_serving_only_install(exported):
    """The image's entry point: `esrerank serve` imports only the serve subcommand (cli.main is lazy)."""
    status, err = _serve_without_training_stack("es_plugin_bridge.cli.main", ["serve", str(exported["gru"])])
    assert status == 200, err
