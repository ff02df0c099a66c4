"""The house's floors: no import runs up a floor, and no module imports one that imports it.

Floors, ground first (a module may import only from its own floor or below). A floor is a set
of folders (or top-level modules), never a module inside a folder: the accounting (calibration,
composition, records, budgets) sits below the mechanisms that are calibrated against it. The
ground floor holds what imports nothing of privpca. docs/ARCHITECTURE.md draws the same floors.
"""

from __future__ import annotations

import ast
import pathlib

import privpca

SRC = pathlib.Path(privpca.__file__).parent

FLOORS: list[tuple[str, ...]] = [
    ("privpca.exceptions", "privpca._config", "privpca._columns", "privpca.metrics"),
    ("privpca._validation",),
    ("privpca.accounting",),
    ("privpca.mechanisms",),
    ("privpca.solvers", "privpca.streaming"),
    ("privpca.local_protocol", "privpca.pipeline"),
    ("privpca.federated",),
    ("privpca.decomposition",),
    ("privpca.datasets", "privpca.plot", "privpca.report", "privpca._registry", "privpca.pca",
     "privpca"),
    ("privpca.audit", "privpca.experiments"),
    ("privpca.cli", "privpca.__main__"),
]


def floor_of(module: str) -> int:
    best: tuple[int, int] | None = None
    for i, names in enumerate(FLOORS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and \
                    (best is None or len(name) > best[1]):
                best = (i, len(name))
    assert best is not None, f"{module} is on no floor: add it to FLOORS"
    return best[0]


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Every privpca module → the privpca modules it imports (anywhere in its body)."""
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                # ``from package import module`` imports the module, not the package.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            graph[module].update(t for t in targets if t in modules and t != module)
    return graph


def test_no_import_runs_up_a_floor():
    upward = sorted(
        f"{a} (floor {floor_of(a)}) -> {b} (floor {floor_of(b)})"
        for a, targets in import_graph().items() if a != "privpca"
        for b in targets if b != "privpca" and floor_of(b) > floor_of(a)
    )
    assert not upward, "\n".join(upward)


def test_no_module_imports_one_that_imports_it_back():
    graph = import_graph()
    packages = {m for m in graph
                if (SRC / m.replace("privpca", "", 1).replace(".", "/").lstrip("/")
                    / "__init__.py").exists()}

    def through(module: str, seen: frozenset[str] = frozenset()) -> set[str]:
        # An import from a package is an import of the modules its __init__ re-exports from.
        if module not in packages:
            return {module}
        return {m for b in graph[module] - seen for m in through(b, seen | {module})}

    graph = {a: {m for b in bs for m in through(b)} - {a}
             for a, bs in graph.items() if a not in packages}
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(cycles)


def test_floors_name_folders_and_folders_make_no_circle():
    """A floor lists folders and top-level modules only, and the folders' own graph (every
    import between two of them, a folder inside a folder counted apart) has no circle, on a
    floor or across floors."""
    assert all(name.count(".") <= 1 for floor in FLOORS for name in floor), FLOORS

    def folder(module: str) -> str:
        path = SRC.parent / module.replace(".", "/")
        inner = module if (path / "__init__.py").exists() else module.rpartition(".")[0]
        return module if inner == "privpca" else inner  # a top-level module is its own room

    folders: dict[str, set[str]] = {}
    for a, targets in import_graph().items():
        if a == "privpca":
            continue
        folders.setdefault(folder(a), set()).update(
            folder(b) for b in targets if b != "privpca" and folder(b) != folder(a))
    done: set[str] = set()

    def reach(node: str, path: list[str]) -> None:
        for nxt in sorted(folders.get(node, ())):
            assert nxt not in path, " -> ".join([*path[path.index(nxt):], nxt])
            if nxt not in done:
                reach(nxt, [*path, nxt])
        done.add(node)

    for node in sorted(folders):
        reach(node, [node])


def test_the_checks_see_a_violation():
    """The floors are read from the code: a module is found and placed."""
    graph = import_graph()
    assert "privpca.mechanisms.noise" in graph["privpca.decomposition.analyze_gauss"]
    assert floor_of("privpca.cli") > floor_of("privpca.decomposition.dp_pca") > \
        floor_of("privpca.mechanisms.noise") > floor_of("privpca.exceptions")


def test_every_fit_reads_its_table_through_one_door():
    """scikit-learn's ``validate_data`` on a table to be fitted (``reset`` true or absent)
    is called only by :func:`privpca._validation.fit_input`, which refuses identifier
    columns first: a rule added there holds for every estimator, present and future."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if _module_name(path) == "privpca._validation":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id",
                                                       getattr(node.func, "attr", "")) \
                    == "validate_data":
                reset = [kw.value for kw in node.keywords if kw.arg == "reset"]
                if not (reset and isinstance(reset[0], ast.Constant) and reset[0].value is False):
                    offenders.append(f"{_module_name(path)}:{node.lineno}")
    assert offenders == [], offenders


#: The compiled kernels are written as flat loops for numba; every other room stays small.
KERNELS = {"_kernels.py", "_bingham_kernels.py"}
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 600, 100


def test_every_room_is_small():
    """No module over 600 lines and no function over 100, outside the numba kernels: a size a
    reader takes in at once (issue 37)."""
    too_long = []
    for path in SRC.rglob("*.py"):
        if path.name in KERNELS:
            continue
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(SRC)}:{node.name}: {length} lines")
    assert not too_long, too_long
