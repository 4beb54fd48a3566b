"""`judgeline serve`'s runner finds the processes it started for flow runs by their flow run id
(flows/serving.py), so a stop can let those of runs that have ended exit."""

from __future__ import annotations

import os
import subprocess
import sys

from flows.serving import flow_run_processes


def test_flow_run_processes_finds_a_child_by_its_flow_run_id_until_it_exits() -> None:
    env = {**os.environ, "PREFECT__FLOW_RUN_ID": "0f0e0d0c-0000-4000-8000-000000000001"}
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    run = subprocess.Popen(sleep, env=env)
    other = subprocess.Popen(sleep, env=dict(os.environ))
    try:
        found = flow_run_processes(os.getpid())
        assert {k: p.pid for k, p in found.items()} == {
            "0f0e0d0c-0000-4000-8000-000000000001": run.pid
        }
    finally:
        for proc in (run, other):
            proc.kill()
            proc.wait()
    assert flow_run_processes(os.getpid()) == {}
