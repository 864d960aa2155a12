"""The package's import graph runs one way (README, "Where things live"): ``cli/`` on top, the native
module at the bottom, no circles, no package reaching into another's private names.

The graph is read from the source with ``ast`` (every ``import``/``from ... import`` of an rlcore
module, at module level or inside a function; imports under ``if TYPE_CHECKING:`` are left out
because they never run)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "python" / "rlcore"

# Layers, bottom to top: a module may import only from its own layer or below. Within one layer
# the package graph must still be acyclic.
LAYERS: list[set[str]] = [
    {"rlcore._core"},
    {"rlcore.errors", "rlcore.types", "rlcore.stats", "rlcore.schedules"},
    {"rlcore.returns", "rlcore.batch", "rlcore.nets", "rlcore.logging", "rlcore.results"},
    {"rlcore.buffers", "rlcore.envs", "rlcore.datasets"},
    {"rlcore.collect", "rlcore.algos", "rlcore.compat"},
    {"rlcore.trainers"},
    {"rlcore.presets", "rlcore.imitation", "rlcore.distributed", "rlcore.policy"},
    {"rlcore.demo", "rlcore"},
    {"rlcore.cli"},
]
# Modules that may import the native module (the rest use the buffers' and returns' Python API).
NATIVE_USERS = ("rlcore.buffers", "rlcore.returns", "rlcore.errors", "rlcore")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(module: str) -> str:
    """The package (``rlcore.buffers``) or top-level module (``rlcore.batch``) a module belongs to."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def _layer(unit: str) -> int:
    for k, layer in enumerate(LAYERS):
        if unit in layer:
            return k
    raise AssertionError(f"{unit} is in no layer of tests/test_import_graph.py: place it")


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(imported module, imported names, line) for every rlcore import that can run."""
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names if a.name.split(".")[0] == "rlcore"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "rlcore":
                out.append((node.module, [a.name for a in node.names], node.lineno))
    return out


def _edges() -> list[tuple[str, str, list[str], str]]:
    """(importer, imported module, names, where) over the package, deprecated aliases left out."""
    modules = {_module(p) for p in PKG.rglob("*.py")}
    edges = []
    for path in sorted(PKG.rglob("*.py")):
        me = _module(path)
        for target, names, line in _imports(path):
            # `from rlcore.trainers import checkpoint` imports the submodule
            subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
            for t in subs or [target]:
                edges.append((me, t, names, f"{path.relative_to(PKG.parent)}:{line}"))
    return edges


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_nothing_outside_cli_imports_the_cli() -> None:
    bad = [w for a, b, _, w in _edges() if _unit(b) == "rlcore.cli" and _unit(a) != "rlcore.cli"]
    assert not bad, f"library modules import rlcore.cli: {bad}"


def test_imports_run_down_the_layers() -> None:
    bad = []
    for a, b, _, where in _edges():
        ua, ub = _unit(a), _unit(b)
        if ua != ub and _layer(ub) > _layer(ua):
            bad.append(f"{where}: {a} (layer {_layer(ua)}) imports {b} (layer {_layer(ub)})")
    assert not bad, "imports that run up:\n" + "\n".join(bad)


def test_no_circle_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for a, b, _, _ in _edges():
        if a != b:
            graph.setdefault(a, set()).add(b)
    assert _cycle(graph) is None, f"modules import each other in a circle: {' -> '.join(_cycle(graph) or [])}"


def test_no_circle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    for a, b, _, _ in _edges():
        if _unit(a) != _unit(b) and _unit(a) != "rlcore" and _unit(b) != "rlcore":
            graph.setdefault(_unit(a), set()).add(_unit(b))
    assert _cycle(graph) is None, f"packages import each other in a circle: {' -> '.join(_cycle(graph) or [])}"


def test_no_package_imports_a_private_name_of_another() -> None:
    bad = []
    for a, b, names, where in _edges():
        if _unit(a) == _unit(b) or b == "rlcore._core":
            continue
        private = [n for n in names if n.startswith("_")]
        if private:
            bad.append(f"{where}: {a} takes {private} from {b}")
    assert not bad, "private names taken across packages:\n" + "\n".join(bad)


def test_only_the_buffers_returns_and_errors_touch_the_native_module() -> None:
    bad = [
        w
        for a, b, _, w in _edges()
        if b == "rlcore._core" and not any(a == u or a.startswith(u + ".") for u in NATIVE_USERS if u != "rlcore")
        and a != "rlcore"
    ]
    assert not bad, f"modules other than buffers/returns/errors import rlcore._core: {bad}"


def test_the_graph_reader_sees_a_planted_circle(tmp_path: Path) -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None
