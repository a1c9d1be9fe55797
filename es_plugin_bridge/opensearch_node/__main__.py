"""``python -m es_plugin_bridge.opensearch_node ACTION [--nodes N]`` (``make opensearch``).

``start`` assembles the home if needed, starts a node in the background and prints its URL; the node
keeps running after this command ends, recorded in its run folder, until ``stop``. The data folder is
kept across ``stop``, a crash and ``start`` (on the port it had, when that port is free): only
``clean`` (``make opensearch-clean``) or ``start --fresh`` deletes it, and each says so. ``--nodes 3``
(``make opensearch NODES=3``) does the same for a cluster of three nodes (``cluster.py``), one URL a line.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from .cluster import node_dirs, running_nodes, start_cluster
from .layout import AssemblyError, assemble, default_home
from .node import NodeError, RunningNode, deleted_at_start, java_opts, kept_data, read_running, start, stop

ROOT = Path.cwd()
SINGLE_DIR = ROOT / "build" / "opensearch" / "local"
CLUSTER_DIR = ROOT / "build" / "opensearch" / "cluster"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m es_plugin_bridge.opensearch_node",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("assemble", "start", "stop", "url", "clean"))
    parser.add_argument("--home", type=Path, default=default_home(ROOT),
                        help="The OpenSearch home to lay out and run (default: %(default)s).")
    parser.add_argument("--nodes", type=int, default=None,
                        help="1: one node (default); N > 1: a cluster of N nodes, each in RUN_DIR/node-I. "
                             "stop without --nodes or --run-dir stops the single node and the cluster.")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help=f"The node's config, data, logs and pid (default: {SINGLE_DIR}, or "
                             f"{CLUSTER_DIR} with --nodes N > 1).")
    parser.add_argument("--port", type=int, default=None,
                        help="HTTP port (default: the port this folder's node had if free, else a free one).")
    parser.add_argument("--fresh", action="store_true",
                        help="start: first delete the run folder's data (indices, connectors, models).")
    args = parser.parse_args(argv)
    if args.nodes is not None and args.nodes < 1:
        parser.error(f"--nodes {args.nodes}: give 1 or more")
    try:
        if args.action == "stop" and args.nodes is None and args.run_dir is None:
            return max(_stop(argparse.Namespace(**{**vars(args), "nodes": n, "run_dir": d}), quiet=n > 1)
                       for n, d in ((1, SINGLE_DIR), (3, CLUSTER_DIR)))
        args.nodes = args.nodes or 1
        args.run_dir = args.run_dir or (SINGLE_DIR if args.nodes == 1 else CLUSTER_DIR)
        return ACTIONS[args.action](args)
    except (AssemblyError, NodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _running(args: argparse.Namespace) -> list[RunningNode]:
    if args.nodes == 1:
        return [node] if (node := read_running(args.run_dir)) is not None else []
    return running_nodes(args.run_dir)


def _assemble(args: argparse.Namespace) -> int:
    assemble(args.home)
    return 0


def _start(args: argparse.Namespace) -> int:
    running = _running(args)
    if len(running) == args.nodes:
        print(f"already running: {', '.join(f'{n.url} (pid {n.pid})' for n in running)}", file=sys.stderr)
        print("\n".join(n.url for n in running))
        return 0
    java_opts()  # a malformed OPENSEARCH_JAVA_OPTS is refused before anything is laid out or deleted
    assemble(args.home, log=lambda line: print(line, file=sys.stderr))
    if args.fresh:
        _clean(args.run_dir)
    if args.nodes == 1:
        print(f"starting OpenSearch (30-60 s on 2 cores); {kept_data(args.run_dir)}...", file=sys.stderr)
        nodes = [start(args.home, args.run_dir, port=args.port)]
    else:
        kept = "; ".join(kept_data(d) for d in node_dirs(args.run_dir, args.nodes))
        print(f"starting an OpenSearch cluster of {args.nodes} nodes (1-2 min on 2 cores); {kept}...",
              file=sys.stderr)
        nodes = start_cluster(args.home, args.run_dir, count=args.nodes)
    for line in (line for n in nodes for line in deleted_at_start(n)):
        print(line.removeprefix("esrerank-node: "), file=sys.stderr)
    print(f"OpenSearch is up ({', '.join(f'pid {n.pid}, log {n.log}' for n in nodes)}); stop it with "
          "make opensearch-stop", file=sys.stderr)
    print("\n".join(n.url for n in nodes))
    return 0


def _stop(args: argparse.Namespace, quiet: bool = False) -> int:
    running = _running(args)
    if not running:
        if not quiet:
            print(f"no OpenSearch node is running from {args.run_dir}", file=sys.stderr)
        return 0
    for node in running:
        stop(node)
        print(f"stopped OpenSearch at {node.url}", file=sys.stderr)
    return 0


def _url(args: argparse.Namespace) -> int:
    running = _running(args)
    if not running:
        print(f"no OpenSearch node is running from {args.run_dir}", file=sys.stderr)
        return 1
    print("\n".join(n.url for n in running))
    return 0


def _clean_stopped(args: argparse.Namespace) -> int:
    running = _running(args)
    if running:
        print(f"error: a node is running from {args.run_dir} ({running[0].url}); stop it first "
              "(make opensearch-stop)", file=sys.stderr)
        return 2
    _clean(args.run_dir)
    return 0


ACTIONS = {"assemble": _assemble, "start": _start, "stop": _stop, "url": _url, "clean": _clean_stopped}


def _clean(run_dir: Path) -> None:
    """Delete a stopped node's run folder (data, config, logs), on purpose and saying so."""
    if not run_dir.exists():
        print(f"nothing to delete: {run_dir} does not exist", file=sys.stderr)
        return
    shutil.rmtree(run_dir)
    print(f"deleted {run_dir} (the node's data: every index, connector and model)", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
