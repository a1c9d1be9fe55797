"""The engine is decided in one module, ``elastic/cluster/dialect.py``: no other module of the
product compares an engine's name (``== "opensearch"``, ``in ("elasticsearch", …)``, ``!= OPENSEARCH``). A
new check of "which engine" goes through ``dialect`` (or ``ClusterInfo.is_opensearch``), so the rule
(``GET /``'s ``version.distribution``) can change in one place.

Only ``elastic/cluster/`` asks which engine a cluster is (issue 45): the rest of the product asks the
cluster for a feature (``ClusterInfo.retrievers``, ``hybrid_query``, ``knn_plugin``), for the value given
for its engine (``ClusterInfo.for_engine``, ``dialect.for_client``), or for a body in its engine's terms
(``opensearch_dsl.request_body``), and never reads ``is_opensearch`` itself."""

from __future__ import annotations

import ast
from pathlib import Path

from es_plugin_bridge.elastic.cluster import dialect

PACKAGE = Path(dialect.__file__).resolve().parents[2]  # es_plugin_bridge/
NAMES = {dialect.OPENSEARCH, dialect.ELASTICSEARCH}
CONSTANTS = {"OPENSEARCH", "ELASTICSEARCH", "ENGINE"}


def names_an_engine(node: ast.AST) -> bool:
    """Whether an expression is an engine's name: the string itself, a tuple/list/set holding one, or
    one of the constants that spell it."""
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(names_an_engine(e) for e in node.elts)
    if isinstance(node, ast.Name):
        return node.id in CONSTANTS
    if isinstance(node, ast.Attribute):
        return node.attr in CONSTANTS
    return False


def engine_comparisons(source: str) -> list[int]:
    """The lines of ``source`` that compare something with an engine's name."""
    return [node.lineno for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Compare)
            and any(names_an_engine(n) for n in [node.left, *node.comparators])]


def test_only_the_dialect_module_compares_an_engine_name():
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             if path != Path(dialect.__file__).resolve()
             for line in engine_comparisons(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_scan_finds_each_form_of_comparison():
    """The check above can fail: the dialect module's own comparisons are found, and each form."""
    assert len(engine_comparisons(Path(dialect.__file__).read_text(encoding="utf-8"))) >= 3
    probe = ('def f(c, e):\n    return (c.engine == "opensearch" or e in ("elasticsearch",)\n'
             '            or e != dialect.OPENSEARCH or ENGINE == e)\n')
    assert engine_comparisons(probe) == [2, 2, 3, 3]


def asks_the_engine(source: str) -> list[int]:
    """The lines of ``source`` that name ``is_opensearch`` (a call, an attribute, an import)."""
    found = [node.lineno for node in ast.walk(ast.parse(source))
             if (isinstance(node, ast.Name) and node.id == "is_opensearch")
             or (isinstance(node, ast.Attribute) and node.attr == "is_opensearch")
             or (isinstance(node, ast.ImportFrom) and any(a.name == "is_opensearch" for a in node.names))]
    return sorted(set(found))


def test_only_the_cluster_package_asks_which_engine_a_cluster_is():
    cluster = Path(dialect.__file__).resolve().parent
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             if cluster not in path.resolve().parents
             for line in asks_the_engine(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_scan_for_engine_questions_finds_each_form():
    """The check above can fail: the cluster package's own questions are found, and each form."""
    assert asks_the_engine(Path(dialect.__file__).read_text(encoding="utf-8"))
    probe = ("from es_plugin_bridge.elastic.cluster.dialect import is_opensearch\n"
             "def f(cluster, client):\n"
             "    return cluster.is_opensearch or is_opensearch(client)\n")
    assert asks_the_engine(probe) == [1, 3]


def test_the_rule_is_get_roots_distribution():
    """OpenSearch's ``GET /`` says ``"distribution": "opensearch"`` in ``version``
    (OpenSearch ``server/src/main/java/org/opensearch/action/main/MainResponse.java``); Elasticsearch's
    has no distribution (or, in a 7.x build, ``default``)."""
    assert dialect.engine_of({"number": "2.19.1", "distribution": "opensearch"}) == dialect.OPENSEARCH
    assert dialect.engine_of({"number": "9.1.0", "build_flavor": "default"}) == dialect.ELASTICSEARCH
    assert dialect.engine_of(None) == dialect.ELASTICSEARCH
    assert dialect.display_name(dialect.OPENSEARCH) == "OpenSearch"
    assert dialect.display_name(None) == "the search engine"
