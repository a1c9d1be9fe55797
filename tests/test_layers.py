"""Imports go one way: every folder of the package sits on a layer and imports only from its own layer
or below, no module imports itself back through others, and no code outside a model family's own
modules branches on a family or a model type's name (docs/architecture.md, "Layers").

Measured on the source with ``ast`` (imports inside functions included), so a lazy import that runs
back up fails here as surely as one at the top of a file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("es_plugin_bridge", "exporters")

#: Bottom to top. A module may import from its own layer or any layer below, never above. Top-level
#: modules of the package (``errors``, ``jvm``, ``measures``, the package ``__init__``) are the floor.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("(root)", "opensearch_node"),
    ("core", "data"),
    ("text",),
    ("serving",),
    ("models",),
    ("engines",),
    ("training",),
    ("baselines",),
    ("rankers",),
    ("evaluation",),
    ("exporters",),
    ("bridge",),
    ("elastic",),
    ("kibana",),
    ("demo",),
    ("cli",),
)
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}

#: The model families' own modules: the only places that may name a family or a model type to decide.
FAMILY_MODULES = ("es_plugin_bridge/training/families/", "es_plugin_bridge/models/registry.py",
                  "es_plugin_bridge/models/similarity_model.py", "es_plugin_bridge/models/transformer.py",
                  "es_plugin_bridge/serving/inputs/")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def layer_of(module: str) -> str:
    """The folder a module belongs to: ``exporters``, a sub-package of the package, or ``(root)``."""
    parts = module.split(".")
    if parts[0] == "exporters":
        return "exporters"
    is_package = MODULES.get(module, Path()).name == "__init__.py"
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and is_package) else "(root)"


def imports_of(module: str) -> set[str]:
    """The product modules ``module`` imports anywhere in its source. ``from pkg import submodule``
    counts as importing the submodule (Python initialises the parent package first in any case)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            submodules = {f"{source}.{a.name}" for a in node.names} & MODULES.keys()
            found.update(submodules if len(submodules) == len(node.names) else {source, *submodules})
    resolved = set()
    for name in found:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            resolved.add(name)
    return resolved


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_folder_has_a_layer():
    assert {layer_of(m) for m in MODULES} <= set(RANK), {layer_of(m) for m in MODULES} - set(RANK)


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    upward = sorted(f"{m} ({layer_of(m)}) imports {d} ({layer_of(d)})"
                    for m, deps in GRAPH.items() for d in deps if RANK[layer_of(d)] > RANK[layer_of(m)])
    assert upward == []


#: Inside ``elastic/``: the cluster (the connection, the dialect, the clients) sits below the rest of the
#: wing; it knows no mode, no set-up, no indexing (issue 45: ``ClusterInfo.require`` once read the modes'
#: registry from ``cluster/connection.py``; the requirements now live in ``modes/``).
CLUSTER = "es_plugin_bridge.elastic.cluster"


def _up_from_the_cluster(graph: dict[str, set[str]]) -> list[str]:
    """Imports from ``cluster/`` to any other module of ``elastic/``."""
    inside = f"{CLUSTER}."
    return sorted(f"{m} imports {d}" for m, deps in graph.items() if m == CLUSTER or m.startswith(inside)
                  for d in deps if d.startswith("es_plugin_bridge.elastic.")
                  and not (d == CLUSTER or d.startswith(inside)))


def test_the_cluster_imports_nothing_of_the_rest_of_elastic():
    assert _up_from_the_cluster(GRAPH) == []
    made_up = {f"{CLUSTER}.connection": {"es_plugin_bridge.elastic.modes", f"{CLUSTER}.dialect"}}
    assert _up_from_the_cluster(made_up) == [f"{CLUSTER}.connection imports es_plugin_bridge.elastic.modes"]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_circle_and_the_layer_rule_an_upward_import():
    """The two checks above can fail: a made-up circle is found, and a real upward edge is ranked upward."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert RANK[layer_of("es_plugin_bridge.cli.main")] > RANK[layer_of("es_plugin_bridge.core.fusion")]
    assert layer_of("es_plugin_bridge.errors") == "(root)" and layer_of("exporters.export") == "exporters"
    assert "es_plugin_bridge.core.scoring" in GRAPH["es_plugin_bridge.serving.model_dir"]


def _names() -> set[str]:
    from es_plugin_bridge.models.registry import REGISTRY

    return set(REGISTRY) | {entry.family for entry in REGISTRY.values()}


def _branches_on_names(path: Path, names: set[str]) -> list[int]:
    """Lines comparing a model type or family name (``==``, ``!=``, ``in``) with a value, or matching it."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            # a tuple, list or set literal compared with (``kind in ("transformer", "subword")``) counts
            # as each of its elements
            operands += [e for o in operands if isinstance(o, ast.Tuple | ast.List | ast.Set) for e in o.elts]
            if any(isinstance(o, ast.Constant) and o.value in names for o in operands):
                lines.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and isinstance(node.value, ast.Constant) \
                and node.value.value in names:
            lines.append(node.lineno)
    return lines


def test_no_branch_on_a_family_or_type_name_outside_the_familys_own_modules():
    names = _names()
    assert {"transformer", "vocabulary", "subword", "bow-cnn"} <= names
    found = []
    for path in MODULES.values():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(FAMILY_MODULES) or (rel in FAMILY_MODULES):
            continue
        found += [f"{rel}:{line}" for line in _branches_on_names(path, names)]
    assert found == []


@pytest.mark.parametrize("source", ['if model.model_type == "transformer":\n    pass\n',
                                    'x = family != "subword"\n',
                                    'x = kind in ("transformer", "cnn-x")\n',
                                    'x = kind not in ["other", "vocabulary"]\n',
                                    'x = family in {"subword"}\n',
                                    'match kind:\n    case "vocabulary":\n        pass\n'])
def test_the_branch_finder_sees_each_form(tmp_path, source):
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    assert _branches_on_names(path, _names()) == [1 if "match" not in source else 2]
