"""`judgeline serve`: Prefect's runner, except that a stop lets flow runs that have already
ended finish their process before it cancels the rest.

A flow run's process outlives its final state: its completion or failure hook runs (the
nightly run emits its alarms there, flows/history.py), then the engine reports the end to the
runner and the process exits, one to three seconds in all. A Prefect runner that stops in that
window forces Cancelled ("Runner is shutting down.") on the run anyway, which replaces its
Completed or the alarm automation's Failed "Alarm" (docs/design.md#alarms).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any
from uuid import UUID

import psutil
from prefect.client.orchestration import get_client
from prefect.exceptions import TerminationSignal
from prefect.runner import Runner

ENDED_RUN_EXIT_S = 30.0
"""How long a stop waits for the processes of flow runs that have ended to exit."""

_POLL_S = 0.2


def flow_run_processes(pid: int) -> dict[str, psutil.Process]:
    """The live processes below `pid` that a Prefect runner started for a flow run, by the
    flow run's id."""
    found: dict[str, psutil.Process] = {}
    for child in psutil.Process(pid).children(recursive=True):
        try:
            flow_run_id = child.environ().get("PREFECT__FLOW_RUN_ID")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if flow_run_id:
            found[flow_run_id] = child
    return found


async def _ended_runs_alive(pid: int) -> list[str]:
    """The flow runs below `pid` whose state is final while their process still runs; none if
    the states cannot be read (the server is gone, a run deleted), so a stop always goes on."""
    ended = []
    try:
        async with get_client() as client:
            for flow_run_id in flow_run_processes(pid):
                state = (await client.read_flow_run(UUID(flow_run_id))).state
                if state is not None and state.is_final():
                    ended.append(flow_run_id)
    except Exception:  # any failure to read the states means: wait no longer
        return []
    return ended


class ServeRunner(Runner):
    """A runner whose stop waits (up to ENDED_RUN_EXIT_S) for the processes of flow runs that
    have already ended, then cancels the flow runs still running as Prefect's runner does."""

    async def cancel_all(self) -> None:
        deadline = time.monotonic() + ENDED_RUN_EXIT_S
        while time.monotonic() < deadline and await _ended_runs_alive(os.getpid()):
            await asyncio.sleep(_POLL_S)
        await super().cancel_all()


def serve_deployments(deployments: list[Any]) -> None:
    """Serve the deployments until SIGTERM or Ctrl-C (what `prefect.serve` does, with
    ServeRunner)."""
    runner = ServeRunner(pause_on_shutdown=True)
    for deployment in deployments:
        runner.add_deployment(deployment)
    with contextlib.suppress(KeyboardInterrupt, TerminationSignal):
        asyncio.run(runner.start())
