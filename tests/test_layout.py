"""The layout of schemas/, tasks/, flows/ and simjudge/: no import cycle, no private name
imported from another module, no module too long to read in one sitting, a few flat modules in
tasks/ beside its packages, the pipeline's stages never importing the simulated judge, no
branch on where files live outside tasks/store/. Read from the source with `ast`, nothing
imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from support import REPO

PACKAGES = ("schemas", "tasks", "flows", "simjudge")
MAX_LINES = 400


def _module_name(path: Path) -> str:
    """`tasks/judging/cache.py` -> `tasks.judging.cache`; a package's __init__ is the package."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    """Every module of the project packages by dotted name."""
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if ".venv" not in path.parts
    }


MODULES = project_modules()


def _imports(name: str, path: Path) -> Iterator[tuple[str, str, int]]:
    """(imported module, imported name or "", line) for every import anywhere in a module.

    `from pkg import sub` of a submodule imports `pkg.sub`; relative imports are resolved.
    """
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield base, alias.name, node.lineno


def import_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for module, imported, _ in _imports(name, path):
            target = f"{module}.{imported}" if imported else module
            if target not in MODULES:
                target = module
            if target in MODULES and target != name:
                graph[name].add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a list of modules, the first repeated at the end) per strongly connected
    component of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_through(min(c), c, graph) for c in components]


def _cycle_through(start: str, component: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path from `start` back to itself inside one component (breadth first)."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if nxt not in parents:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is in a component without a cycle")


def private_imports() -> list[str]:
    """`module:line imports _name from other.module` for each private name imported."""
    found = []
    for name, path in MODULES.items():
        for module, imported, line in _imports(name, path):
            if module in MODULES and module != name and imported.startswith("_"):
                found.append(
                    f"{MODULES[name].relative_to(REPO)}:{line} imports {imported} from {module}"
                )
    return found


def long_modules() -> list[str]:
    """`path (N lines)` for each module over MAX_LINES lines."""
    found = []
    for path in MODULES.values():
        lines = len(path.read_text("utf-8").splitlines())
        if lines > MAX_LINES:
            found.append(f"{path.relative_to(REPO)} ({lines} lines)")
    return found


def test_the_graph_sees_every_kind_of_import() -> None:
    graph = import_graph()
    assert (
        "tasks.errors" in graph["tasks.store.workdir"] or "tasks.errors" in graph["flows.runtime"]
    )
    assert graph["schemas"] >= {"schemas.arrow", "schemas.manifest"}  # a package's __init__
    cycle = import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()})
    assert cycle == [["a", "b", "c", "a"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle() -> None:
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_private_name_is_imported_from_another_module() -> None:
    found = private_imports()
    assert not found, "private names imported:\n" + "\n".join(found)


def test_no_module_is_over_the_line_limit() -> None:
    found = long_modules()
    assert not found, f"modules over {MAX_LINES} lines:\n" + "\n".join(found)


def test_tasks_holds_a_few_flat_modules_beside_one_package_per_stage_or_concern() -> None:
    flat = sorted(p.name for p in (REPO / "tasks").glob("*.py"))
    assert len(flat) <= 7, flat  # with __init__.py


def test_the_pipelines_stages_never_import_the_simulated_judge() -> None:
    """The simulated judge is a test double and the demo's judge: only the command line's
    `demo` and `serve-judge` use it."""
    users = {"flows.cli.demo", "flows.cli.simjudge"}
    found = sorted(
        f"{name} imports {target}"
        for name, targets in import_graph().items()
        if not name.startswith("simjudge") and name not in users
        for target in targets
        if target == "simjudge" or target.startswith("simjudge.")
    )
    assert not found, found
