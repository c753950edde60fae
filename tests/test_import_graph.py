"""No import cycle among the modules of ``ltx2k/kernels``.

Every module under the folder is parsed with ``ast`` (not imported): each import of an
``ltx2k.kernels`` module, at module level or inside a function, is an edge, and the graph
must have no cycle. A kernel module registers its own op and routes to it through
``_routing``; ``ops`` imports the kernel modules, never the other way round. Imports under
``if TYPE_CHECKING:`` do not run, so they are not edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "ltx2k.kernels"


class Edge:
    """``source`` imports ``target`` at ``where`` (path:line)."""

    def __init__(self, source: str, target: str, where: str) -> None:
        self.source, self.target, self.where = source, target, where


def _modules(root: Path, package: str) -> dict[str, Path]:
    """Dotted name -> file of every module in the package's folder (subpackages too)."""
    base = root / Path(*package.split("."))
    found = {}
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_module_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, (ast.Attribute, ast.Name))
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def _imports(tree: ast.AST):
    """Every import statement (and ``importlib.import_module("...")`` call with a literal
    name) that runs, at any depth: module level, functions, classes, branches."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _import_module_call(node):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _targets(node: ast.AST, module: str, is_package: bool, modules: dict) -> list[str]:
    """The package's modules that one import statement loads."""
    if isinstance(node, ast.Call):
        return [node.args[0].value]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: from the module's own package, one level up per extra dot
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join(anchor + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    # ``from pkg import name`` loads pkg.name when that is a module, else reads pkg.
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def import_graph(root: Path, package: str) -> dict[str, list[Edge]]:
    """Module -> its imports of the package's own modules."""
    modules = _modules(root, package)
    graph: dict[str, list[Edge]] = {m: [] for m in modules}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in _imports(tree):
            for target in _targets(node, module, is_package, modules):
                # ``import ltx2k.kernels.rope.sub`` names a module inside a module file:
                # the longest known prefix is the module that gets loaded.
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != module:
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    graph[module].append(Edge(module, target, where))
    return graph


def find_cycle(graph: dict[str, list[Edge]]) -> list[Edge] | None:
    """One cycle of the graph as its edges, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[Edge] = []

    def visit(module: str) -> list[Edge] | None:
        state[module] = 1
        for edge in sorted(graph.get(module, ()), key=lambda e: e.target):
            if state.get(edge.target) == 1:  # back to a module on the path: a cycle
                start = next(i for i, e in enumerate(path) if e.source == edge.target)
                return path[start:] + [edge]
            if edge.target not in state:
                path.append(edge)
                cycle = visit(edge.target)
                if cycle:
                    return cycle
                path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def describe(cycle: list[Edge]) -> str:
    names = " -> ".join([cycle[0].source] + [e.target for e in cycle])
    lines = "\n".join(f"  {e.source} imports {e.target} at {e.where}" for e in cycle)
    return f"import cycle: {names}\n{lines}"


def test_kernels_import_graph_has_no_cycle():
    graph = import_graph(ROOT, PACKAGE)
    # The scan sees the package: the kernel modules and the index of their ops.
    assert {"ltx2k.kernels.rope", "ltx2k.kernels.adaln", "ltx2k.kernels.ops"} <= set(graph)
    assert {e.target for e in graph["ltx2k.kernels.ops"]} >= {
        "ltx2k.kernels.rope",
        "ltx2k.kernels.adaln",
    }
    cycle = find_cycle(graph)
    assert cycle is None, describe(cycle)


def _registered_ops(path: Path) -> set[str]:
    """The ``ltx2k::`` op names a module registers (``torch.library.custom_op("ltx2k::x")``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) in ("custom_op", "triton_op")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).startswith("ltx2k::")
        ):
            names.add(node.args[0].value.removeprefix("ltx2k::"))
    return names


def test_ops_is_the_index_of_every_registered_op():
    # Importing ltx2k.kernels.ops registers every op, and its docstring lists each one.
    graph = import_graph(ROOT, PACKAGE)
    indexed = {e.target for e in graph["ltx2k.kernels.ops"]}
    index = ast.get_docstring(ast.parse((ROOT / "ltx2k/kernels/ops.py").read_text()))
    for module, path in _modules(ROOT, PACKAGE).items():
        for op in _registered_ops(path):
            assert module in indexed, f"{module} registers ltx2k::{op}; ops.py must import it"
            assert f"torch.ops.ltx2k.{op}(" in index, f"ops.py's docstring must list {op}"


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


CYCLES = {
    "function-level": {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "def f():\n    from pkg import a\n    return a\n",
    },
    "relative, through a third module": {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",
        "pkg/b.py": "from .c import thing\n",
        "pkg/c.py": "import pkg.a as _a\nthing = 1\n",
    },
    "import_module": {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import x\n",
        "pkg/b.py": "import importlib\nx = importlib.import_module('pkg.a')\n",
    },
}


@pytest.mark.parametrize("case", CYCLES)
def test_a_cycle_is_found_and_named(tmp_path, case):
    _write(tmp_path, CYCLES[case])
    cycle = find_cycle(import_graph(tmp_path, "pkg"))
    assert cycle is not None
    text = describe(cycle)
    assert text.startswith("import cycle: pkg.a -> ") and text.splitlines()[0].endswith("pkg.a")
    assert "pkg/a.py:1" in text


def test_what_does_not_run_or_reads_the_package_is_no_cycle(tmp_path):
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg import a\n",  # a package importing its module
            "pkg/a.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\n"
            ),
            "pkg/b.py": "from pkg import a\n",
        },
    )
    assert find_cycle(import_graph(tmp_path, "pkg")) is None
