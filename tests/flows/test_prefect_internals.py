"""What judgeline relies on of Prefect beyond its documented API, each named here with why no
documented API does it, so a Prefect upgrade that moves or changes one fails here first (and
not in a user's run); and that judgeline changes nothing inside Prefect or httpx.

The versions `./run` installs are pinned in `requirements.lock`; an upgrade of that lock
runs this file first.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import logging
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = [*REPO.glob("flows/**/*.py"), *REPO.glob("tasks/**/*.py"), *REPO.glob("schemas/*.py")]

QUIET_LOGGERS = {
    "EventsWorker": "prefect.events.worker",
    "APILogWorker": "prefect.logging.handlers",
    "prefect.events.clients": None,
    "prefect.FlowRunCancellingObserver": "prefect._internal.observers",
}
"""flows/runtime.py WORKER_LOGGERS: loggers whose records judgeline drops without --debug (a
traceback for every failed reconnect once the local server went away, warnings while queues
drain at exit). Prefect documents how to configure logging, not the names of its services'
loggers -> the module that names each (None: the logger is that module's own)."""

ATTRIBUTES = (
    # flows/dask.py: which task runner the running flow was given (a flow run with a
    # DaskTaskRunner sends its judge batches there); Prefect documents the run context but
    # no accessor for its task runner.
    ("prefect.context", "FlowRunContext", "model_fields", "task_runner"),
)
"""(module, attribute, where its fields are, field) judgeline reads beyond the documented API."""

FLOW_RUN_ID_ENV = "PREFECT__FLOW_RUN_ID"
"""flows/serving.py: which of `judgeline serve`'s child processes runs which flow run, read from
the environment Prefect's runner gives each (Prefect's own `prefect.runtime.flow_run` reads
it there too); no documented API maps a runner's processes to their flow runs."""


def test_the_runner_still_names_each_flow_runs_process_in_its_environment() -> None:
    import inspect

    from prefect.runner import _starter_engine

    assert f'"{FLOW_RUN_ID_ENV}": str(flow_run.id)' in inspect.getsource(_starter_engine)


@pytest.mark.parametrize(("module", "attribute", "fields", "field"), ATTRIBUTES)
def test_the_prefect_attributes_judgeline_reads_exist(
    module: str, attribute: str, fields: str, field: str
) -> None:
    found = getattr(importlib.import_module(module), attribute, None)
    assert found is not None, f"{module}.{attribute} is gone"
    assert field in getattr(found, fields), f"{module}.{attribute}.{field} is gone"


@pytest.mark.parametrize(("logger", "module"), sorted(QUIET_LOGGERS.items()))
def test_the_loggers_judgeline_silences_are_still_prefects(logger: str, module: str | None) -> None:
    from flows.runtime import WORKER_LOGGERS

    assert logger in WORKER_LOGGERS
    if module is None:
        importlib.import_module(logger)
        assert logging.getLogger(logger).name == logger
    else:
        source = inspect.getsource(importlib.import_module(module))
        name = logger.removeprefix("prefect.")
        assert f'"{name}"' in source or f"class {name}" in source, (
            f"{module} no longer names {name}: its service logs under another name now"
        )


def test_at_most_five_entries_none_internal() -> None:
    """The logger names are one entry, the flow run's variable another, each attribute one."""
    assert 2 + len(ATTRIBUTES) <= 5
    assert not any(module.startswith("prefect._internal") for module, *_ in ATTRIBUTES)


def test_no_module_imports_prefects_internals_or_its_server() -> None:
    """judgeline starts Prefect's server as Prefect documents it (`prefect server start`)
    and imports none of its private modules."""
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                parts = name.split(".")
                private = any(p.startswith("_") for p in parts[1:])
                if parts[0] == "prefect" and (private or parts[1:2] == ["server"]):
                    found.append((path.relative_to(REPO), name))
    assert not found, found


def _modules_bound(tree: ast.Module) -> set[str]:
    """The names a module binds to Prefect's, httpx's or httpcore's modules or members."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("prefect", "httpx", "httpcore"):
                    bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:  # noqa: SIM102
            if node.module.split(".")[0] in ("prefect", "httpx", "httpcore"):
                bound.update(alias.asname or alias.name for alias in node.names)
    return bound


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def test_no_module_assigns_attributes_of_prefect_or_httpx() -> None:
    """No patches: nothing of judgeline's sets an attribute on a module, class or object it
    imported from Prefect or httpx (`x.attr = ...`, `setattr(x, ...)`)."""
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text("utf-8"))
        bound = _modules_bound(tree)
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr":
                targets = [ast.Attribute(value=node.args[0], attr="?")] if node.args else []
            for target in targets:
                if isinstance(target, ast.Attribute) and _root(target) in bound:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, found


def test_no_module_reads_the_systems_socket_tables() -> None:
    """Which process listens where is asked of psutil (Linux, macOS, the BSDs), never read
    from Linux's /proc/net."""
    readers = [p.relative_to(REPO) for p in SOURCES if "/proc/net" in p.read_text("utf-8")]
    assert not readers, readers
