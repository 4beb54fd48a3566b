"""`judgeline serve`: Prefect's runner for the deployments, until SIGTERM or Ctrl-C; it
replaces no deployment a `prefect deploy` registered on a work pool under one of its names
(`pooled_namesakes`).

A flow run's process outlives its final state: its completion or failure hook runs (the
nightly run emits its alarms there, flows/history.py), then it exits, one to three seconds in
all. A runner that stops in that window cancels the run anyway ("Runner is shutting down."),
which replaces its Completed or the alarm automation's Failed "Alarm". So the runner runs in
a thread of its own (Prefect then leaves the process's signals alone), and a stop first lets
the processes of runs that have ended exit, for up to ENDED_RUN_EXIT_S, then stops the runner,
which cancels the runs still going.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from typing import Any
from uuid import UUID

import psutil

ENDED_RUN_EXIT_S = 30.0
"""How long a stop waits for the processes of flow runs that have ended to exit."""


async def pooled_namesakes(deployments: list[Any]) -> list[str]:
    """The deployments on the server under a served deployment's name (its flow's and its
    own) that run on a work pool, as `flow/name (work pool P)`: serving would replace them."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    found = []
    async with get_client() as client:
        for deployment in deployments:
            name = f"{deployment.flow_name}/{deployment.name}"
            try:
                existing = await client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            if existing.work_pool_name:
                found.append(f"{name} (work pool {existing.work_pool_name!r})")
    return found


def flow_run_processes(pid: int) -> dict[str, psutil.Process]:
    """The live processes below `pid` that a Prefect runner started for a flow run, by the
    flow run's id (which Prefect's runner gives the process as PREFECT__FLOW_RUN_ID)."""
    found: dict[str, psutil.Process] = {}
    for child in psutil.Process(pid).children(recursive=True):
        try:
            flow_run_id = child.environ().get("PREFECT__FLOW_RUN_ID")
        except psutil.Error:
            continue
        if flow_run_id:
            found[flow_run_id] = child
    return found


def _ended_runs_alive(pid: int) -> bool:
    """Whether a flow run below `pid` has a final state while its process still runs (False
    if the states cannot be read: a stop always goes on)."""
    from prefect import get_client

    try:
        with get_client(sync_client=True) as client:
            for flow_run_id in flow_run_processes(pid):
                state = client.read_flow_run(UUID(flow_run_id)).state
                if state is not None and state.is_final():
                    return True
    except Exception:  # any failure to read the states means: wait no longer
        return False
    return False


def serve_deployments(deployments: list[Any]) -> None:
    """Serve the deployments (their schedules paused when serving stops)."""
    import os

    from prefect.runner import Runner

    runner = Runner(pause_on_shutdown=True)
    for deployment in deployments:
        runner.add_deployment(deployment)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    serving = threading.Thread(target=asyncio.run, args=(runner.start(),), daemon=True)
    serving.start()
    while not stop.wait(0.5):
        if not serving.is_alive():
            return
    deadline = time.monotonic() + ENDED_RUN_EXIT_S
    while time.monotonic() < deadline and _ended_runs_alive(os.getpid()):
        time.sleep(0.2)
    if serving.is_alive() and runner.started:
        runner.execute_in_background(runner.astop).result(timeout=60)
    serving.join(60)
