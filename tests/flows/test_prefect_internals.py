"""Every part of Prefect judgeline reaches into beyond its documented API, named here, so a
Prefect upgrade that moves or changes one fails here first (and not in a user's run).

The versions `./run` installs are pinned in `requirements.lock`; an upgrade of that lock
runs this file first. Each entry says where judgeline relies on it.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TLS_USERS = (
    "prefect.client.orchestration",
    "prefect._internal.version_checking",
    "prefect._internal.websockets",
)
"""Modules whose `ssl` module `flows.prefecttls.share_tls_contexts` replaces, so that their
verifying SSL contexts are made once per CA file: each must still import `ssl` as a module
and call `ssl.create_default_context`."""

ATTRIBUTES = (
    # flows/prefecttls.py: the transports Prefect makes while it is imported.
    ("httpx._transports.default", "create_ssl_context", None),
    # flows/nightly.py: one API client for all of a run's task runs.
    ("prefect.context", "SyncClientContext", "get_or_create"),
    # flows/flowkind.py: a flow's task runs are made with no tags in context.
    ("prefect.context", "TagsContext", None),
    # flows/dask.py, flows/history.py: the flow run a task runs in.
    ("prefect.context", "FlowRunContext", "get"),
    # flows/dask.py: the Dask workers' API URL for the time of a run.
    ("prefect.settings", "PREFECT_API_URL", None),
    ("prefect.settings", "temporary_settings", None),
    # flows/serverd.py: the local server's ASGI application, served by judgeline's uvicorn.
    ("prefect.server.api.server", "create_app", None),
    # flows/serving.py: the deployments' runner and the signal it stops on.
    ("prefect.runner", "Runner", None),
    ("prefect.exceptions", "TerminationSignal", None),
    # flows/history.py: alarms as Prefect events.
    ("prefect.events", "emit_event", None),
    # flows/flowkind.py: every flow records its parameters with its own encoder.
    ("prefect.flows", "Flow", "serialize_parameters"),
    # flows/judge.py and every flow's tasks: no result caching.
    ("prefect.cache_policies", "NO_CACHE", None),
)
"""(module, attribute, method or None) judgeline imports or calls."""

QUIET_LOGGERS = {
    # flows/runtime.py WORKER_LOGGERS: Prefect's background services log under their class
    # names while the local server restarts; judgeline drops their records.
    "EventsWorker": "prefect.events.worker",
    "APILogWorker": "prefect.logging.handlers",
    "prefect.events.clients": None,
}
"""Logger names judgeline silences -> the Prefect module that defines the class of that name
(None: the logger is the module's own)."""


@pytest.mark.parametrize("name", TLS_USERS)
def test_the_modules_whose_tls_contexts_are_shared_still_use_ssl(name: str) -> None:
    module = importlib.import_module(name)
    assert getattr(module, "ssl", None) is ssl, (
        f"{name} no longer imports `ssl` as a module: flows.prefecttls.share_tls_contexts "
        "shares nothing there (update PREFECT_TLS_USERS)"
    )
    assert "ssl.create_default_context(" in inspect.getsource(module), name


SHARED_TLS_PROBE = textwrap.dedent("""
    import ssl

    reads = []
    read = ssl.SSLContext.load_verify_locations

    def counted(self, *args, **kwargs):
        reads.append(args or kwargs)
        return read(self, *args, **kwargs)

    ssl.SSLContext.load_verify_locations = counted

    from flows.prefecttls import share_tls_contexts, shared_while_importing

    with shared_while_importing():
        import prefect.blocks.webhook
        import prefect.client.orchestration as orchestration
    share_tls_contexts()
    for _ in range(3):
        orchestration.get_client(sync_client=True)
        orchestration.get_client()
    import httpx

    httpx.Client()  # made after the import: a context of its own
    print(len(reads))
""")


def test_prefects_api_clients_read_their_ca_file_once() -> None:
    """Prefect's import (two transports of `prefect.blocks.webhook`) and six API clients (a
    command makes four to six, on several threads) read certifi's bundle once, and a client
    of judgeline's own made after reads it again: flows/prefecttls.py shares only Prefect's."""
    env = {k: v for k, v in os.environ.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    env.update(PREFECT_API_URL="http://127.0.0.1:9/api", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", SHARED_TLS_PROBE], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2"], done.stdout


@pytest.mark.parametrize(("module", "attribute", "method"), ATTRIBUTES)
def test_the_prefect_attributes_judgeline_uses_exist(
    module: str, attribute: str, method: str | None
) -> None:
    found = getattr(importlib.import_module(module), attribute, None)
    assert found is not None, f"{module}.{attribute} is gone"
    if method is not None:
        assert callable(getattr(found, method, None)), f"{module}.{attribute}.{method} is gone"


@pytest.mark.parametrize(("logger", "module"), sorted(QUIET_LOGGERS.items()))
def test_the_loggers_judgeline_silences_are_still_prefects(logger: str, module: str | None) -> None:
    from flows.runtime import WORKER_LOGGERS

    assert logger in WORKER_LOGGERS
    if module is None:
        importlib.import_module(logger)
        assert logging.getLogger(logger).name == logger
    else:
        assert inspect.isclass(getattr(importlib.import_module(module), logger, None)), (
            f"{module}.{logger} is gone: its service logs under another name now"
        )


def test_every_internal_prefect_import_of_judgeline_is_listed() -> None:
    """A `prefect._internal` or `prefect.server` module named in flows/ or tasks/ must be
    one this file checks."""
    checked = set(TLS_USERS) | {m for m, _, _ in ATTRIBUTES}
    unlisted = []
    for path in [*REPO.glob("flows/**/*.py"), *REPO.glob("tasks/**/*.py")]:
        text = path.read_text("utf-8")
        for word in text.replace('"', " ").replace("'", " ").split():
            name = word.strip("(),")
            internal = name.startswith(("prefect._internal.", "prefect.server."))
            if internal and name not in checked:
                unlisted.append((path.relative_to(REPO), name))
    assert not unlisted, unlisted


def test_a_flows_parameters_are_recorded_as_prefect_records_them() -> None:
    """flows/flowkind.py encodes parameters with pydantic instead of FastAPI's encoder: for
    the parameters judgeline's flows take, both give the same JSON values."""
    from prefect.flows import Flow

    from flows.flowkind import JudgelineFlow
    from schemas.config import JudgeSpec

    def fn(run_id: str = "") -> None:
        return None

    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="m",
                      configs=[{"name": "low", "temperature": 0.0}])  # fmt: skip
    parameters = {"run_id": "r", "judges": [judge], "config": {"k": 2, "names": ["a"]},
                  "work_dir": None, "show_progress": True, "batch_size": 500,
                  "paths": [str(REPO / "x.jsonl")], "rng_seed": 7, "odd": object()}  # fmt: skip
    ours = JudgelineFlow(fn=fn, name="ours").serialize_parameters(parameters)
    prefects = Flow(fn=fn, name="prefects").serialize_parameters(parameters)
    assert ours == prefects
    assert ours["judges"][0]["configs"][0]["name"] == "low" and ours["odd"] == "<object>"


def test_the_settings_a_server_on_a_copied_database_sets_are_prefects() -> None:
    """flows/serverd.py skips the block registration of a server whose database is a copy by
    two environment variables, read when Prefect is imported."""
    probe = (
        "from prefect.settings import get_current_settings as s; "
        "print(s().server.register_blocks_on_start, s().server.memoize_block_auto_registration)"
    )
    env = {k: v for k, v in os.environ.items() if k == "PREFECT_HOME" or "PREFECT_" not in k}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["True", "True"], out.stderr
    from flows.serverd import _skip_block_registration

    saved = dict(os.environ)
    try:
        _skip_block_registration()
        env.update({k: os.environ[k] for k in os.environ if k not in saved})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["False", "False"], out.stderr
