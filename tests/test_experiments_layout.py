"""The experiments package stays untangled: no import cycle, no module above 400 lines.

Edges are every ``import``/``from`` of a ``privpca.experiments`` module found anywhere in a
module (including inside functions and ``TYPE_CHECKING`` blocks), plus the registry's
``BUILTIN_MODULES``, which it imports by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import privpca.experiments
from privpca.experiments.registry import BUILTIN_MODULES

PACKAGE = "privpca.experiments"
ROOT = Path(privpca.experiments.__file__).parent
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.glob("*.py")):
        name = PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"
        out[name] = path
    return out


def _imports(path: Path, modules: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in modules}
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {name: _imports(path, set(modules)) - {name} for name, path in modules.items()}
    graph[f"{PACKAGE}.registry"] |= set(BUILTIN_MODULES)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_inside_experiments() -> None:
    graph = _graph()
    assert f"{PACKAGE}.wang_xu_lowdim" in graph[f"{PACKAGE}.registry"]
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_experiment_modules_do_not_import_registry_or_runner() -> None:
    graph = _graph()
    for module in BUILTIN_MODULES:
        assert not graph[module] & {f"{PACKAGE}.registry", f"{PACKAGE}.runner"}, module


def test_cycle_detector_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_above_400_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in ROOT.glob("*.py")}
    too_long = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not too_long, too_long
