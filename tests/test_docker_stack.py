"""The dev stack: docker/docker-compose.yml, docker/sidecar.Dockerfile, docker/setup.sh, .dockerignore.

Without Docker: the compose file parses; every build context, Dockerfile, target, bind-mounted path
and named volume it names exists; services are healthchecked, memory-limited and bound to loopback;
the stack says it is dev-only; the image installs serving dependencies only (no torch) and runs as a
non-root user with a /healthz healthcheck; every command the setup script runs exists in the CLI.
With Docker: `docker compose up` comes up healthy, the setup service completes, the questions index
answers a reranked query and the dashboard is in Kibana.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import click
import pytest
import tomllib
import yaml
from docker_available import requires_docker

from es_plugin_bridge.cli.main import cli as esrerank_cli
from es_plugin_bridge.local_http import free_port

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "docker-compose.yml"
DOCKERFILE = DOCKER / "sidecar.Dockerfile"
SETUP = DOCKER / "setup.sh"
ONE_SHOT = {"setup", "opensearch-setup"}
VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def _resolve(text: str, env: dict[str, str] | None = None) -> str:
    """Compose's ``${VAR:-default}`` interpolation with the defaults (or ``env``)."""
    env = env or {}
    return VAR.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), text)


def _stages(dockerfile: str) -> dict[str, str]:
    """Stage name → its instructions (text between its FROM and the next)."""
    parts = re.split(r"^FROM\s+\S+(?:\s+AS\s+(\S+))?\s*$", dockerfile, flags=re.M | re.I)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2) if parts[i]}


def test_compose_services_and_dev_only_warning(compose):
    assert set(compose["services"]) == {"elasticsearch", "kibana", "sidecar", "setup", "opensearch",
                                        "opensearch-setup"}
    es = compose["services"]["elasticsearch"]
    assert re.fullmatch(r"docker\.elastic\.co/elasticsearch/elasticsearch:9\.5\.\d+", _resolve(es["image"]))
    kibana = _resolve(compose["services"]["kibana"]["image"])
    assert re.fullmatch(r"docker\.elastic\.co/kibana/kibana:9\.5\.\d+", kibana)
    assert es["environment"]["discovery.type"] == "single-node"
    assert es["environment"]["xpack.license.self_generated.type"] == "trial"
    assert es["environment"]["xpack.security.enabled"] == "false"
    header = COMPOSE.read_text(encoding="utf-8").split("\nname:")[0]
    assert "DEVELOPMENT ONLY" in header and "Security is OFF" in header and "trial" in header


def test_compose_every_path_exists(compose):
    for name, service in compose["services"].items():
        build = service.get("build")
        if build:
            context = (DOCKER / build["context"]).resolve()
            assert context.is_dir(), name
            dockerfile = context / build["dockerfile"]
            assert dockerfile.is_file(), name
            assert build["target"] in _stages(dockerfile.read_text()), f"{name}: no stage {build['target']}"
        for volume in service.get("volumes", []):
            source = _resolve(volume).split(":")[0]
            if source.startswith((".", "/")):
                path = (DOCKER / source).resolve()
                if "ESRERANK_MODEL_DIR" in volume:
                    # The default is the model `make demo` exports; ESRERANK_MODEL_DIR points elsewhere.
                    assert path == ROOT / "runs" / "demo" / "transformer-onnx"
                    command = (ROOT / "es_plugin_bridge" / "cli" / "demo.py").read_text()
                    steps = (ROOT / "es_plugin_bridge" / "demo" / "steps.py").read_text()
                    assert 'default=Path("runs/demo")' in command and '"transformer-onnx"' in steps
                else:
                    assert path.exists(), f"{name}: {volume}"
            else:
                assert source in compose["volumes"], f"{name}: named volume {source} is not declared"
        if "build" not in service:  # anything not built here must be pulled from a registry
            assert _resolve(service["image"]).startswith(("docker.elastic.co/", "opensearchproject/")), name


def test_compose_health_limits_and_loopback(compose):
    services = compose["services"]
    for name, service in services.items():
        assert service.get("mem_limit"), f"{name}: no mem_limit"
        if name not in ONE_SHOT:
            assert service["healthcheck"]["test"], name
        for port in service.get("ports", []):
            assert _resolve(port).startswith("127.0.0.1:"), f"{name}: {port} is not bound to loopback"
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in services
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits on {dependency}"
    setup = services["setup"]
    assert setup["restart"] == "no"
    assert {d for d, c in setup["depends_on"].items() if c["condition"] == "service_healthy"} == {
        "elasticsearch", "kibana", "sidecar"}
    sidecar = services["sidecar"]
    assert "/healthz" in json.dumps(sidecar["healthcheck"]) or "/readyz" in json.dumps(sidecar["healthcheck"])
    assert sidecar["build"]["args"]["GPU"] == "${ESRERANK_GPU:-0}"


def test_image_installs_serving_dependencies_only_and_runs_as_non_root():
    text = "\n".join(line for line in DOCKERFILE.read_text(encoding="utf-8").splitlines()
                     if not line.lstrip().startswith("#"))
    stages = _stages(text)
    assert {"build", "runtime", "tools", "sidecar"} <= set(stages)
    assert list(stages)[-1] == "sidecar", "the default build target must be the sidecar"
    installs = re.findall(r"pip install ([^&\n\\]+)", text)
    assert installs, "no pip install found"
    allowed = {"/wheels/*.whl", '"onnxruntime-gpu[cuda,cudnn]>=1.20"', '"$(ls /wheels/*.whl)[elastic]"'}
    assert {i.strip() for i in installs} <= allowed, installs
    assert "[elastic]" in stages["tools"] and "[elastic]" not in stages["runtime"] + stages["sidecar"]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert not any(re.match(r"torch\b", dep) for dep in extras["elastic"])  # the tools image stays torch-free
    assert "torch" not in text.lower().replace("no torch", "")
    assert "pip wheel --no-cache-dir --no-deps --wheel-dir /wheels ." in text  # the package itself, no extras
    assert re.search(r'if \[ "\$GPU" = "1" \]; then\s*\\?\s*pip uninstall -y onnxruntime', text)
    for stage in ("tools", "sidecar"):
        users = re.findall(r"^USER\s+(\S+)", stages[stage], flags=re.M)
        assert users and users[-1].split(":")[0] not in ("root", "0"), stage
    assert re.search(r"useradd --system --uid 10001", stages["runtime"])
    assert re.search(r"^HEALTHCHECK .*\n.*/healthz", stages["sidecar"], flags=re.M)
    assert 'ENTRYPOINT ["esrerank", "serve", "/model", "--host", "0.0.0.0"' in stages["sidecar"]


def test_base_install_has_no_torch():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert "torch" not in names and "onnxruntime" in names


def test_base_install_is_serving_only():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert not names & {"torch", "gensim", "scikit-learn", "matplotlib", "ir-measures", "bm25s"}


def test_dockerignore_keeps_what_the_image_copies():
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text(), flags=re.M)
    for sources in copied:
        for source in sources.split():
            assert (ROOT / source).exists(), source
            assert not any(fnmatch.fnmatch(source, p) or source.startswith(p.rstrip("/") + "/")
                           for p in patterns), f"{source} is excluded by .dockerignore"
    for heavy in ("runs", ".venv", ".git", "tests"):
        assert heavy in patterns


def _setup_commands() -> list[list[str]]:
    text = SETUP.read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("esrerank ")]


def test_setup_script_runs_real_cli_commands():
    """Each `esrerank ...` line names an existing (sub)command and only options it accepts."""
    commands = _setup_commands()
    assert [c[:2] for c in commands] == [["es", "setup"], ["es", "index"], ["es", "evaluate"],
                                         ["kibana", "import"]]
    assert os.access(SETUP, os.X_OK) or SETUP.read_text().startswith("#!/bin/sh")
    for argv in commands:
        group = esrerank_cli
        ctx = click.Context(group)
        words = list(argv)
        while isinstance(group, click.Group):
            name = words.pop(0)
            group = group.get_command(ctx, name)
            assert group is not None, f"esrerank {' '.join(argv[:2])}: no such command"
        options = {o for p in group.params for o in getattr(p, "opts", [])}
        for word in words:
            if word.startswith("--"):
                assert word in options, f"esrerank {' '.join(argv[:2])} has no option {word}"


def test_a_missing_model_directory_stops_the_sidecar_in_one_line(compose, exported, tmp_path):
    """The sidecar's compose entry point (docker/check_model.py) runs before ``esrerank serve``: an
    empty /model (what Docker mounts for a missing host path) exits 1 with one line naming the host
    path and the command that creates it; setup waits for a healthy sidecar, so the stack stops."""
    sidecar = compose["services"]["sidecar"]
    entry = sidecar["entrypoint"]
    assert entry[:4] == ["python", "/checks/check_model.py", "/model", "--"]
    assert entry[4:8] == ["esrerank", "serve", "/model", "--host"]  # the image's own ENTRYPOINT after it
    assert "./check_model.py:/checks/check_model.py:ro" in sidecar["volumes"]
    host = _resolve(sidecar["environment"]["ESRERANK_MODEL_DIR_ON_HOST"])
    assert host == "../runs/demo/transformer-onnx"
    assert {"setup", "opensearch-setup"} <= {name for name, s in compose["services"].items()
                                             if s.get("depends_on", {}).get("sidecar", {}).get("condition")
                                             == "service_healthy"}
    script = str(DOCKER / "check_model.py")
    empty = tmp_path / "model"
    empty.mkdir()
    env = {**os.environ, "ESRERANK_MODEL_DIR_ON_HOST": host}
    run = subprocess.run([sys.executable, script, str(empty), "--", "true"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: ")
    assert host in run.stderr and "make demo" in run.stderr and "esrerank export-onnx" in run.stderr
    absolute = subprocess.run([sys.executable, script, str(tmp_path / "absent"), "--", "true"],
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "ESRERANK_MODEL_DIR_ON_HOST": str(tmp_path / "absent")})
    assert absolute.returncode == 1 and f"{tmp_path / 'absent'}," in absolute.stderr
    model = subprocess.run([sys.executable, script, str(exported["bow-cnn"]), "--", sys.executable, "-c",
                            "print('served')"], capture_output=True, text=True, env=env, timeout=60)
    assert model.returncode == 0 and model.stdout == "served\n"  # the command runs in its place


# ---- with Docker --------------------------------------------------------------------------------


def _get(url: str, timeout: float = 30) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


@requires_docker
@pytest.mark.elasticsearch
@pytest.mark.slow
def test_compose_stack_comes_up_and_reranks(exported, cli, tmp_path):
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI (with the compose plugin) is not installed")
    ports = {name: free_port() for name in ("ES", "KIBANA", "SIDECAR", "OPENSEARCH")}
    env = {**os.environ, "ESRERANK_MODEL_DIR": str(exported["bow-cnn"]), "ESRERANK_TOKEN": "test-token",
           **{f"ESRERANK_{k}_PORT": str(v) for k, v in ports.items()}}
    project = f"esrerank-test-{uuid.uuid4().hex[:8]}"
    compose = ["docker", "compose", "-f", str(COMPOSE), "-p", project]
    try:
        subprocess.run([*compose, "up", "-d", "--build"], env=env, check=True, timeout=1800)
        waited = subprocess.run([*compose, "wait", "setup"], env=env, capture_output=True, text=True,
                                timeout=1800)
        logs = subprocess.run([*compose, "logs", "setup"], env=env, capture_output=True, text=True).stdout
        assert waited.stdout.strip().splitlines()[-1] == "0", logs
        assert "created dashboard esrerank-ranking-comparison" in logs or "replaced dashboard" in logs, logs
        states = [json.loads(line) for line in subprocess.run(
            [*compose, "ps", "--format", "json"], env=env, capture_output=True, text=True, check=True
        ).stdout.splitlines() if line.strip()]
        for state in states:
            assert state["Health"] in ("healthy", ""), state
        es_url = f"http://127.0.0.1:{ports['ES']}"
        assert _get(f"{es_url}/_license")["license"]["type"] == "trial"
        endpoints = _get(f"{es_url}/_inference/_all")["endpoints"]
        assert any(e["service"] == "custom" and e["task_type"] == "rerank" for e in endpoints)
        for mode in ("native", "bridge"):
            sidecar = f"http://127.0.0.1:{ports['SIDECAR']}"
            code, out, err = cli(["es", "search", "--es-url", es_url, "--mode", mode, "--json",
                                  "--sidecar", sidecar, "--token", "test-token",
                                  "Where can I buy a good used car in Doha?"])
            assert code == 0, err
            assert json.loads(out).get("reranked") is True, out
        kibana = f"http://127.0.0.1:{ports['KIBANA']}"
        dashboard = _get(f"{kibana}/api/saved_objects/dashboard/esrerank-ranking-comparison")
        assert dashboard["attributes"]["title"] == "esrerank: ranking comparison"
        runs = _get(f"{es_url}/esrerank-runs/_count")["count"]
        assert runs > 0, "the setup's evaluate run wrote no per-query results"
    finally:
        subprocess.run([*compose, "down", "-v", "--remove-orphans"], env=env, timeout=600)
