"""Start and stop a cluster of several OpenSearch nodes on 127.0.0.1 from one assembled home.

Each node is a run folder ``node-N`` of its own (config, data, logs, pid, ports) under the cluster's
folder, as ``make opensearch``'s single node is; all are cluster-manager eligible and data nodes, so
losing any one leaves a quorum of two. Discovery follows OpenSearch's "several nodes on one host":
no ``discovery.type``, ``discovery.seed_hosts`` the nodes' transport addresses, and
``cluster.initial_cluster_manager_nodes`` their names (read only when the cluster first forms; later
starts find the cluster's state in the data folders). The ports a node had are taken again when free,
so a restarted node rejoins where its peers look for it.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

from .node import (
    NODE_SETTINGS,
    NodeError,
    RunningNode,
    launch,
    read_running,
    recorded,
    recorded_ports,
    stop,
    tail,
)

CLUSTER_NAME = "esrerank-cluster"

#: Three 512 MB nodes fit a 2-core, 24 GB machine beside the tests' own single node and the sidecars.
CLUSTER_HEAP = "512m"


def node_dirs(root: Path, count: int) -> list[Path]:
    return [root / f"node-{n}" for n in range(count)]


def cluster_settings(names: list[str], transport_ports: list[int]) -> dict[str, object]:
    """The single node's settings for a node of a cluster: the same product settings, other discovery."""
    settings = {key: value for key, value in NODE_SETTINGS.items()
                if key not in ("discovery.type", "node.name", "cluster.name")}
    return {**settings, "cluster.name": CLUSTER_NAME,
            "discovery.seed_hosts": [f"127.0.0.1:{port}" for port in transport_ports],
            "cluster.initial_cluster_manager_nodes": names}


def start_cluster(home: Path, root: Path, *, count: int = 3, heap: str = CLUSTER_HEAP,
                  timeout: float = 300.0) -> list[RunningNode]:
    """Start every node of the cluster that is not running, then wait for ``count`` nodes and green."""
    dirs = node_dirs(root, count)
    ports = _ports(dirs)
    names = [f"esrerank-node-{n}" for n in range(count)]
    nodes: list[RunningNode] = []
    for n, run_dir in enumerate(dirs):
        running = read_running(run_dir)
        if running is None:
            settings = {**cluster_settings(names, [t for _, t in ports]), "node.name": names[n]}
            running, _ = launch(home, run_dir, settings, http_port=ports[n][0], transport_port=ports[n][1],
                                heap=heap)
        nodes.append(running)
    try:
        wait_for_nodes(nodes[0].url, count, timeout=timeout)
    except NodeError as exc:
        for node in nodes:
            stop(node)
        logs = "\n".join(f"--- {d / 'console.log'} ---\n{tail(d / 'console.log', 10)}" for d in dirs)
        raise NodeError(f"{exc}\n{logs}") from None
    return nodes


def restart_node(home: Path, root: Path, index: int, *, count: int = 3,
                 heap: str = CLUSTER_HEAP) -> RunningNode:
    """Start node ``index`` again on its ports and data (after it was killed); returns without waiting."""
    dirs = node_dirs(root, count)
    ports = _ports(dirs)
    names = [f"esrerank-node-{n}" for n in range(count)]
    settings = {**cluster_settings(names, [t for _, t in ports]), "node.name": names[index]}
    node, _ = launch(home, dirs[index], settings, http_port=ports[index][0], transport_port=ports[index][1],
                     heap=heap)
    return node


def _ports(dirs: list[Path]) -> list[tuple[int, int]]:
    """Each node's (HTTP, transport) ports: a running node's own (its peers must find it there), a
    stopped node's last ones when free, else free ones."""
    out = []
    for run_dir in dirs:
        running = read_running(run_dir)
        if running is not None:
            out.append((int(running.url.rpartition(":")[2]), int(recorded(run_dir)["transport_port"])))
        else:
            out.append(recorded_ports(run_dir))
    return out


def kill_node(root: Path, index: int, timeout: float = 30.0) -> None:
    """``kill -9`` node ``index`` (a crash: no clean close) and wait until its process is gone."""
    running = read_running(root / f"node-{index}")
    if running is None:
        raise NodeError(f"node {index} of {root} is not running")
    os.killpg(running.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(running.pid, os.WNOHANG)[0]:  # our child: reaped, no zombie left
                return
        except ChildProcessError:  # not our child: gone once the pid is
            if not _alive(running.pid):
                return
        time.sleep(0.2)
    raise NodeError(f"node {index} (pid {running.pid}) still runs {timeout:.0f} s after SIGKILL")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def running_nodes(root: Path) -> list[RunningNode]:
    """The cluster's nodes whose processes run, in node order."""
    return [node for d in sorted(root.glob("node-*")) if (node := read_running(d)) is not None]


def wait_for_nodes(url: str, count: int, *, timeout: float, status: str = "green") -> dict:
    """Poll ``_cluster/health`` at ``url`` until ``count`` nodes are in and the status is ``status``."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            query = f"wait_for_nodes={count}&wait_for_status={status}&timeout=5s"
            with urllib.request.urlopen(f"{url}/_cluster/health?{query}", timeout=15) as resp:
                health = json.loads(resp.read())
            if not health.get("timed_out") and health.get("number_of_nodes") == count:
                return health
            last = f"{health.get('number_of_nodes')} node(s), {health.get('status')}"
        except (OSError, urllib.error.URLError, ValueError) as exc:
            last = str(exc)
            time.sleep(1.0)
    raise NodeError(f"the cluster at {url} did not reach {count} nodes and {status} in {timeout:.0f} s "
                    f"(last: {last})")
