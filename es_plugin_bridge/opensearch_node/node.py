"""Start and stop one single-node OpenSearch cluster on 127.0.0.1 from an assembled home.

Each node gets a run folder of its own (config, data, logs, its pid and URL), so the tests' node and
a person's ``make opensearch`` node never share state. Starting again keeps the folder's data (the
indices, ml-commons' connectors and models live in ``data/``) and takes the ports it had when free.
The settings are those the product needs on a 2-core machine without the ML role or the security
plugin: single node, a free port, no disk watermarks, and ml-commons allowed to run connectors on
this node and to call a private address.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from es_plugin_bridge.local_http import NotReady, free_port, port_is_free, wait_until_ready

from .layout import SERVER_VERSION

#: Every setting here that is not OpenSearch's default is listed in docs/opensearch.md ("What differs
#: from a distribution's node"). ml-commons' memory breakers trip on a shared 2-core machine well below
#: real pressure: at 100 they never refuse a connector call. The rest let a node without the ML role run
#: remote models. Automatic index creation stays on (OpenSearch's default; its tutorials' ``_bulk``
#: into a new index relies on it).
NODE_SETTINGS: dict[str, object] = {
    "cluster.name": "esrerank",
    "node.name": "esrerank-node",
    "discovery.type": "single-node",
    "network.host": "127.0.0.1",
    "cluster.routing.allocation.disk.threshold_enabled": False,
    "plugins.ml_commons.only_run_on_ml_node": False,
    "plugins.ml_commons.connector.private_ip_enabled": True,
    "plugins.ml_commons.trusted_connector_endpoints_regex": [r"^http://(127\.0\.0\.1|localhost)(:[0-9]+)?/.*$"],
    "plugins.ml_commons.native_memory_threshold": 100,
    "plugins.ml_commons.jvm_heap_memory_threshold": 100,
}

#: The JVM options of the distribution's ``config/jvm.options`` that matter on Java 17.
JVM_OPTIONS = (
    "-XX:+UseG1GC", "-Dfile.encoding=UTF-8", "-Djava.awt.headless=true",
    "-Djava.locale.providers=SPI,COMPAT", "-Dlog4j2.formatMsgNoLookups=true",
    "-Dlog4j.shutdownHookEnabled=false", "-Dlog4j2.disable.jmx=true",
    "-Dio.netty.noUnsafe=true", "-Dio.netty.noKeySetOptimization=true",
    "-Dio.netty.recycler.maxCapacityPerThread=0", "-Dio.netty.allocator.numDirectArenas=0",
)


class NodeError(RuntimeError):
    """The node did not start, or did not answer in time; the message quotes its log."""


@dataclass(frozen=True)
class RunningNode:
    url: str
    pid: int
    run_dir: Path

    @property
    def log(self) -> Path:
        return self.run_dir / "logs" / "esrerank.log"


def start(home: Path, run_dir: Path, *, port: int | None = None, heap: str = "1g",
          timeout: float = 180.0) -> RunningNode:
    """Start a node in the background and wait for its cluster to be at least yellow.

    The run folder's data is kept; without ``port``, the HTTP and transport ports of the folder's last
    node are taken again when free (so a URL a user saved still works), else free ones."""
    ports = recorded_ports(run_dir)
    node, process = launch(home, run_dir, NODE_SETTINGS, http_port=port or ports[0], transport_port=ports[1],
                           heap=heap)
    try:
        wait_ready(node.url, timeout=timeout, alive=lambda: process.poll() is None)
    except NodeError as exc:
        stop(node)
        raise NodeError(f"{exc}\n--- last lines of {run_dir / 'console.log'} ---\n"
                        f"{tail(run_dir / 'console.log')}") from None
    return node


def recorded_ports(run_dir: Path) -> tuple[int, int]:
    """(HTTP, transport) ports of the folder's last node where still free, else free ones."""
    before = recorded(run_dir)
    return _reuse(before.get("url", "").rpartition(":")[2]), _reuse(str(before.get("transport_port", "")))


def launch(home: Path, run_dir: Path, settings: dict[str, object], *, http_port: int, transport_port: int,
           heap: str) -> tuple[RunningNode, subprocess.Popen]:
    """Write the node's configuration into ``run_dir`` (keeping its data) and start its JVM in the
    background; no waiting (a cluster's nodes are ready only together)."""
    conf = run_dir / "config"
    conf.mkdir(parents=True, exist_ok=True)
    (run_dir / "data").mkdir(exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    settings = {**settings, "http.port": http_port, "transport.port": transport_port,
                "path.data": str(run_dir / "data"), "path.logs": str(run_dir / "logs")}
    # opensearch.yml accepts JSON (YAML is its superset), which keeps the regex free of YAML quoting.
    (conf / "opensearch.yml").write_text(json.dumps(settings, indent=1))
    (conf / "log4j2.properties").write_text(Path(__file__).with_name("log4j2.properties").read_text())
    java = os.environ.get("JAVA_HOME")
    java_bin = str(Path(java) / "bin" / "java") if java else "java"
    classpath = os.pathsep.join([str(home / "lib" / "*"), str(home / "launcher")])
    command = [java_bin, f"-Xms{heap}", f"-Xmx{heap}", *JVM_OPTIONS, f"-Djava.io.tmpdir={run_dir / 'tmp'}",
               *java_opts(), "-cp", classpath, "Launcher", str(home), str(conf)]
    (run_dir / "tmp").mkdir(exist_ok=True)
    console = open(run_dir / "console.log", "wb")  # noqa: SIM115 - the child writes to it after we return
    process = subprocess.Popen(command, stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    node = RunningNode(f"http://127.0.0.1:{http_port}", process.pid, run_dir)
    record = {"url": node.url, "pid": node.pid, "transport_port": transport_port, "version": SERVER_VERSION}
    (run_dir / "node.json").write_text(json.dumps(record))
    return node, process


def java_opts() -> list[str]:
    """``OPENSEARCH_JAVA_OPTS``, as the distribution's ``bin/opensearch`` reads it: JVM options after the
    node's own, so that one given again (``-Xmx``) wins."""
    value = os.environ.get("OPENSEARCH_JAVA_OPTS", "")
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise NodeError(f"OPENSEARCH_JAVA_OPTS={value!r} is not a list of JVM options: {exc}") from None


def wait_ready(url: str, *, timeout: float, alive: Callable[[], bool] = lambda: True) -> None:
    """Poll ``_cluster/health`` until the cluster is yellow or green; NodeError otherwise."""
    def healthy(body: bytes) -> bool:
        return json.loads(body).get("status") in ("yellow", "green")

    try:
        wait_until_ready(f"{url}/_cluster/health?wait_for_status=yellow&timeout=5s", timeout=timeout,
                         alive=alive, ready=healthy, poll=1.0)
    except NotReady as exc:
        raise NodeError(f"OpenSearch was not ready: {exc}") from None


def stop(node: RunningNode, timeout: float = 60.0) -> None:
    """SIGTERM (the launcher closes the node cleanly), then SIGKILL if it lingers."""
    try:
        os.killpg(node.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reaped, _ = os.waitpid(node.pid, os.WNOHANG)
        except ChildProcessError:  # not our child: poll whether it still exists
            reaped = 0 if _exists(node.pid) else node.pid
        if reaped:
            return
        time.sleep(0.3)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(node.pid, signal.SIGKILL)


#: How the launcher's console names an index it deleted at start (``Launcher.NativeEngineGuard.DELETED``).
DELETED_AT_START = "esrerank-node: deleted index "


def deleted_at_start(node: RunningNode) -> list[str]:
    """The launcher's lines for each index it deleted at this start (a faiss index already on disk, which
    would stop the node at its first write), from ``DELETED_AT_START`` on."""
    try:
        text = (node.run_dir / "console.log").read_text(errors="replace")
    except OSError:
        return []
    return [line[line.index(DELETED_AT_START):] for line in text.splitlines() if DELETED_AT_START in line]


def read_running(run_dir: Path) -> RunningNode | None:
    """The node recorded in ``run_dir`` if its process still runs (a pid the system gave to another
    program since a crash is not the node)."""
    data = recorded(run_dir)
    if not data or not _exists(data["pid"]) or not _is_launcher(data["pid"]):
        return None
    return RunningNode(data["url"], data["pid"], run_dir)


def kept_data(run_dir: Path) -> str:
    """What a start will find in the run folder's data, in words for the person starting it."""
    indices = run_dir / "data" / "nodes" / "0" / "indices"
    if not indices.is_dir():
        return f"new data folder {run_dir / 'data'}"
    count = sum(1 for _ in indices.iterdir())
    return (f"keeping the data in {run_dir / 'data'} ({count} index folder{'s' * (count != 1)}, "
            "system indices included; make opensearch-clean deletes it)")


def recorded(run_dir: Path) -> dict:
    """What ``node.json`` says of the folder's last node (URL, pid, transport port), or {}."""
    record = run_dir / "node.json"
    try:
        return json.loads(record.read_text()) if record.is_file() else {}
    except (OSError, ValueError):
        return {}


def _reuse(port: str) -> int:
    """``port`` again when it is a number and free, else a free port."""
    return int(port) if port.isdigit() and port_is_free(int(port)) else free_port()


def _is_launcher(pid: int) -> bool:
    try:
        return b"Launcher" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc (not Linux): trust the pid


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def tail(path: Path, lines: int = 30) -> str:
    """The last lines of a node's log, for an error message."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
