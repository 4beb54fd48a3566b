"""A Dask cluster as the README starts one: a `dask scheduler` process and a `dask worker`
process (a nanny per worker process) on loopback, for the tests of the Dask sender under
faults. `workers()` names the worker processes, so a test can kill one or look at the files
they hold."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
from support import REPO

DASK = str(REPO / ".venv" / "bin" / "dask")


class DaskProcesses:
    """The scheduler's address and the processes of the cluster."""

    def __init__(self, address: str, scheduler: subprocess.Popen[bytes],
                 nannies: subprocess.Popen[bytes]) -> None:  # fmt: skip
        self.address = address
        self.scheduler = scheduler
        self.nannies = nannies

    def workers(self) -> list[psutil.Process]:
        """The worker processes (the nannies' process spawns one each), oldest first."""
        children = psutil.Process(self.nannies.pid).children()
        return sorted((p for p in children if _is_worker(p)), key=lambda p: p.create_time())

    def files_held_under(self, folder: Path) -> dict[int, list[str]]:
        """The files under `folder` each worker process holds open, by pid."""
        held: dict[int, list[str]] = {}
        root = str(folder.resolve())
        for proc in self.workers():
            try:
                paths = [f.path for f in proc.open_files() if f.path.startswith(root)]
            except psutil.NoSuchProcess:
                continue
            if paths:
                held[proc.pid] = paths
        return held

    def wait_for_workers(self, count: int, timeout_s: float = 120.0) -> None:
        from distributed import Client

        with Client(self.address, timeout=30) as client:
            client.wait_for_workers(count, timeout=timeout_s)


def _is_worker(proc: psutil.Process) -> bool:
    try:
        return "spawn_main" in " ".join(proc.cmdline())
    except psutil.NoSuchProcess:
        return False


@contextmanager
def dask_processes(folder: Path, *, workers: int = 2, env: dict[str, str] | None = None
                   ) -> Iterator[DaskProcesses]:  # fmt: skip
    """`dask scheduler` and `dask worker --nworkers N --nthreads 1` on loopback, stopped after;
    `env` is the workers' environment (default: this process's)."""
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "scheduler.json"
    logs = open(folder / "dask.log", "wb")  # noqa: SIM115 - closed below
    scheduler = subprocess.Popen(
        [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(file)],
        stdout=logs, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not file.exists() or not file.read_text().strip():
        assert scheduler.poll() is None, (folder / "dask.log").read_text()
        assert time.monotonic() < deadline, "the scheduler did not start within 60 s"
        time.sleep(0.1)
    address = json.loads(file.read_text())["address"]
    nannies = subprocess.Popen(
        [DASK, "worker", address, "--nworkers", str(workers), "--nthreads", "1",
         "--host", "127.0.0.1", "--no-dashboard", "--memory-limit", "0"],
        env={**os.environ, **(env or {})}, cwd=REPO, stdout=logs, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    cluster = DaskProcesses(address, scheduler, nannies)
    try:
        cluster.wait_for_workers(workers)
        yield cluster
    finally:
        for proc in (nannies, scheduler):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
        logs.close()
