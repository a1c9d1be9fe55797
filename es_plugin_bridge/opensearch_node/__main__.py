"""``python -m es_plugin_bridge.opensearch_node {assemble,start,stop,url,clean}`` (``make opensearch``).

``start`` assembles the home if needed, starts a node in the background and prints its URL; the node
keeps running after this command ends, recorded in its run folder, until ``stop``. The data folder is
kept across ``stop``, a crash and ``start`` (on the port it had, when that port is free): only
``clean`` (``make opensearch-clean``) or ``start --fresh`` deletes it, and each says so.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from .layout import AssemblyError, assemble, default_home
from .node import NodeError, kept_data, read_running, start, stop

ROOT = Path.cwd()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m es_plugin_bridge.opensearch_node",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("assemble", "start", "stop", "url", "clean"))
    parser.add_argument("--home", type=Path, default=default_home(ROOT),
                        help="The OpenSearch home to lay out and run (default: %(default)s).")
    parser.add_argument("--run-dir", type=Path, default=ROOT / "build" / "opensearch" / "local",
                        help="The node's config, data, logs and pid (default: %(default)s).")
    parser.add_argument("--port", type=int, default=None,
                        help="HTTP port (default: the port this folder's node had if free, else a free one).")
    parser.add_argument("--fresh", action="store_true",
                        help="start: first delete the run folder's data (indices, connectors, models).")
    args = parser.parse_args(argv)
    try:
        if args.action == "assemble":
            assemble(args.home)
        elif args.action == "start":
            running = read_running(args.run_dir)
            if running is not None:
                print(f"already running: {running.url} (pid {running.pid})", file=sys.stderr)
                print(running.url)
                return 0
            assemble(args.home, log=lambda line: print(line, file=sys.stderr))
            if args.fresh:
                _clean(args.run_dir)
            print(f"starting OpenSearch (30-60 s on 2 cores); {kept_data(args.run_dir)}...", file=sys.stderr)
            node = start(args.home, args.run_dir, port=args.port)
            print(f"OpenSearch is up (pid {node.pid}, log {node.log}); stop it with make opensearch-stop",
                  file=sys.stderr)
            print(node.url)
        elif args.action == "stop":
            running = read_running(args.run_dir)
            if running is None:
                print("no OpenSearch node is running from " f"{args.run_dir}", file=sys.stderr)
                return 0
            stop(running)
            print(f"stopped OpenSearch at {running.url}", file=sys.stderr)
        elif args.action == "clean":
            running = read_running(args.run_dir)
            if running is not None:
                print(f"error: a node is running from {args.run_dir} ({running.url}); stop it first "
                      "(make opensearch-stop)", file=sys.stderr)
                return 2
            _clean(args.run_dir)
        else:
            running = read_running(args.run_dir)
            if running is None:
                print(f"no OpenSearch node is running from {args.run_dir}", file=sys.stderr)
                return 1
            print(running.url)
    except (AssemblyError, NodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _clean(run_dir: Path) -> None:
    """Delete a stopped node's run folder (data, config, logs), on purpose and saying so."""
    if not run_dir.exists():
        print(f"nothing to delete: {run_dir} does not exist", file=sys.stderr)
        return
    shutil.rmtree(run_dir)
    print(f"deleted {run_dir} (the node's data: every index, connector and model)", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
