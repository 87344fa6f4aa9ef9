"""The web layer's imports form a ladder (docs/architecture.md, "Layers"): no app imports an app that imports
it back, and no module of ``analysis/`` imports a module that imports it back, directly or through others.

The imports are read from the source (``ast``), every one of them: at module level, inside functions (an
import hidden in a function to dodge a cycle is still a cycle), and under ``if TYPE_CHECKING``. A cycle is
reported as the chain of imports that closes it, each with its file and line.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
APPS = ("profiles", "analysis", "captures", "frontend", "pypto_web")
# The order the layer table gives (lowest first): an app may import only apps before it in this list.
LADDER = ("profiles", "analysis", "captures", "frontend", "pypto_web")
# Apps whose modules must not import each other in a circle either (analysis/ was the knot of issue 19).
MODULE_ACYCLIC = APPS


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. analysis.tasks
    target: str  # the imported module of ours, e.g. analysis.pipeline.ingest
    where: str  # file:line

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.where})"


def module_files(roots: tuple[str, ...] = APPS, base: Path = REPO) -> dict[str, Path]:
    """Dotted name -> file, for every module of the given top-level packages."""
    out: dict[str, Path] = {}
    for root in roots:
        for path in sorted((base / root).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (relative imports resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(modules: dict[str, Path], base: Path = REPO) -> list[Import]:
    """Every import of one of ``modules`` by another, wherever in the file it is written."""
    found: list[Import] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        where = path.relative_to(base).as_posix()
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                parent = _resolve(name, is_package, node)
                # ``from analysis import tasks`` imports the module analysis.tasks; ``from x import name``, x
                for alias in node.names:
                    sub = f"{parent}.{alias.name}"
                    targets.append(sub if sub in modules else parent)
            for target in targets:
                # ``import a.b.c`` runs a.b.c; the longest known module it names is the one depended on
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.append(Import(name, target, f"{where}:{node.lineno}"))
    return found


def find_cycle(edges: dict[str, dict[str, Import]]) -> list[Import] | None:
    """One cycle of the graph as the imports that make it, or None (depth-first, colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    nodes: list[str] = []  # the current path
    path: list[Import] = []  # the imports between them

    def visit(node: str) -> list[Import] | None:
        state[node] = 1
        nodes.append(node)
        for target, edge in sorted(edges.get(node, {}).items()):
            if state.get(target) == 1:
                return path[nodes.index(target):] + [edge]
            if state.get(target) is None:
                path.append(edge)
                cycle = visit(target)
                if cycle:
                    return cycle
                path.pop()
        state[node] = 2
        nodes.pop()
        return None

    for node in sorted(edges):
        if state.get(node) is None:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def _app(module: str) -> str:
    return module.split(".", 1)[0]


def app_graph(found: list[Import]) -> dict[str, dict[str, Import]]:
    """App -> app it imports -> the first such import (by file and line), as an example to name."""
    edges: dict[str, dict[str, Import]] = defaultdict(dict)
    for imp in sorted(found, key=lambda i: i.where):
        a, b = _app(imp.source), _app(imp.target)
        if a != b:
            edges[a].setdefault(b, imp)
    return edges


def module_graph(found: list[Import], app: str) -> dict[str, dict[str, Import]]:
    edges: dict[str, dict[str, Import]] = defaultdict(dict)
    for imp in sorted(found, key=lambda i: i.where):
        if _app(imp.source) == app and _app(imp.target) == app:
            edges[imp.source].setdefault(imp.target, imp)
    return edges


def describe(cycle: list[Import], what: str, name: Callable[[str], str] = str) -> str:
    chain = " -> ".join(name(m) for m in [cycle[0].source] + [e.target for e in cycle])
    lines = "\n".join(f"  {e}" for e in cycle)
    return f"import cycle between {what}: {chain}\n{lines}"


@pytest.fixture(scope="module")
def found() -> list[Import]:
    return imports_of(module_files())


def test_no_cycle_between_apps(found: list[Import]) -> None:
    cycle = find_cycle(app_graph(found))
    assert cycle is None, describe(cycle, "apps", _app)


def test_apps_import_only_apps_below_them(found: list[Import]) -> None:
    """The ladder of the layer table: profiles < analysis < captures < frontend < pypto_web."""
    upward = [e for e in sorted(found, key=lambda i: i.where)
              if LADDER.index(_app(e.target)) > LADDER.index(_app(e.source))]
    assert not upward, "imports up the layer ladder (" + " < ".join(LADDER) + "):\n" + "\n".join(
        f"  {e}" for e in upward)


@pytest.mark.parametrize("app", MODULE_ACYCLIC)
def test_no_cycle_between_modules_of(app: str, found: list[Import]) -> None:
    cycle = find_cycle(module_graph(found, app))
    assert cycle is None, describe(cycle, f"modules of {app}/")


# The engine's classes whose names the web apps also give to their models: imported under an alias
# (CoreProfile, CoreFinding, CoreArtifact), so that ``Profile`` in a web module is always the model.
CLASHING = {"pypto_core.profile": "Profile", "pypto_core.rules.finding": "Finding",
            "pypto_core.rules": "Finding", "pypto_core.remedies.artifact": "Artifact",
            "pypto_core.remedies": "Artifact"}


def test_engine_classes_that_share_a_model_name_come_in_under_an_alias() -> None:
    bare = []
    for path in module_files().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in CLASHING:
                bare += [f"{path.relative_to(REPO)}:{node.lineno} imports {node.module}.{a.name} unaliased"
                         for a in node.names
                         if a.name == CLASHING[node.module] and a.asname in (None, a.name)]
    assert not bare, "\n".join(bare)


def test_the_walker_sees_an_import_hidden_in_a_function(tmp_path: Path) -> None:
    """The check itself: a cycle closed by a function-local import is found and named."""
    pkg = tmp_path / "knot"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from knot.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from knot import a\n    return a\n")
    cycle = find_cycle(module_graph(imports_of(module_files(("knot",), tmp_path), tmp_path), "knot"))
    assert cycle is not None
    message = describe(cycle, "modules of knot/")
    assert "knot.a -> knot.b -> knot.a" in message and "knot/b.py:2" in message, message
