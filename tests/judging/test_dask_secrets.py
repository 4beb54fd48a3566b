"""What a Dask cluster sees of a run: no auth string of the local server, no key or token of
the command's. A `judgeline judge --dask-address` run against a cluster started as
the README starts one (`dask scheduler`, `dask worker`), then the scheduler's and every
worker's memory searched for the command's secrets (Linux, as root: /proc/PID/mem)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from dask_processes import DaskProcesses, dask_processes
from support import REPO, stage_demo_plan

from flows.localserver import ServerFiles, stop_server
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.store.workdir import WorkDir

pytestmark = pytest.mark.slow
OWNER_TOKEN = "owner-token-7f3a91c2d4e5b6a7"
"""A variable of the command's own that no process of the cluster needs."""


def _memory_holds(pid: int, needle: bytes) -> int:
    """How many times `needle` occurs in the readable, writable memory of process `pid`."""
    found = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(start)
                found += mem.read(end - start).count(needle)
            except (OSError, ValueError, OverflowError):
                continue
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskProcesses]:
    if os.getuid() != 0 or not Path("/proc/self/mem").exists():
        pytest.skip("reading another process's memory needs root and Linux's /proc")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    with dask_processes(tmp_path_factory.mktemp("dask"), workers=2, env=clean) as procs:
        yield procs


def test_a_dask_run_ships_no_auth_string_or_key(cluster: DaskProcesses, tmp_path: Path) -> None:
    work = WorkDir(tmp_path / "work")
    plan_id = stage_demo_plan(work, pairs=10, k=2).plan_id
    home = tmp_path / "home"
    with SimJudgeServer() as judge:
        spec = JudgeSpec(name="j", base_url=judge.base_url, model="strong", simulated=True)
        judges = tmp_path / "judges.yaml"
        judges.write_text(yaml.safe_dump({"judges": [spec.model_dump(mode="json")]}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
        env |= {"PREFECT_HOME": str(home), "OWNER_TOKEN": OWNER_TOKEN}
        try:
            done = subprocess.run(
                [str(REPO / ".venv" / "bin" / "judgeline"), "--work-dir", str(work.root),
                 "judge", plan_id, "--judges", str(judges), "--no-progress",
                 "--dask-address", cluster.address],
                env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            assert re.search(r"batches on Dask", done.stdout + done.stderr) or judge.request_log()
            auth = ServerFiles(home).auth_string()
        finally:
            stop_server(home)
    assert auth is not None
    secret = auth.split(":", 1)[1].encode()
    processes = [cluster.scheduler.pid, *(p.pid for p in cluster.workers())]
    assert len(processes) == 3
    for pid in processes:
        assert _memory_holds(pid, secret) == 0, pid
        assert _memory_holds(pid, OWNER_TOKEN.encode()) == 0, pid
