"""The Dask sender under faults, on a cluster started as the README starts one (`dask
scheduler`, `dask worker --nworkers 2`, on loopback): a disk that fills up mid-run stops the
run as the in-process sender does (exit 75, one line, what was kept counted from the work
dir, no worker holding a file of it after), and a worker process SIGKILLed mid-batch costs
no more than the calls it had in flight. Every reply the simulated judge sent is counted
by call key."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dask_processes import DaskProcesses, dask_processes
from support import NO_FAULTS, stage_demo_plan

from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.store.workdir import WorkDir
from tests.flows.test_hostile_input import run_main
from tests.judging.small_disk import tmpfs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness")]
PERSONA = Persona(name="steady", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=120)
CONCURRENCY = 4
"""Calls in flight at once over the whole cluster (each batch gets its share)."""


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer([PERSONA]) as srv:
        srv.set_faults(**NO_FAULTS, max_faults_per_request=None)
        yield srv


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskProcesses]:
    with dask_processes(tmp_path_factory.mktemp("dask")) as procs:
        yield procs


def _judges_file(folder: Path, server: SimJudgeServer) -> Path:
    judge = JudgeSpec(name="j", base_url=server.base_url, model="steady", simulated=True,
                      max_concurrency=CONCURRENCY)  # fmt: skip
    path = folder / "judges.yaml"
    path.write_text(yaml.safe_dump({"judges": [judge.model_dump(mode="json")]}))
    return path


def _paid(server: SimJudgeServer) -> Counter[str]:
    """Replies the simulated judge sent, by call key: what was paid for."""
    log = server.request_log()
    return Counter(e["call_key"] for e in log if e.get("call_key") and e.get("status") == 200)


def _once(condition: Callable[[], bool], then: Callable[[], None]) -> None:
    """Run `then` in a thread as soon as `condition` holds."""

    def watch() -> None:
        deadline = time.monotonic() + 240
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.005)
        then()

    threading.Thread(target=watch, daemon=True).start()


def _judge(work: WorkDir, plan_id: str, judges: Path, cluster: DaskProcesses,
           monkeypatch: pytest.MonkeyPatch, *more: str) -> Any:  # fmt: skip
    return run_main(monkeypatch, "--work-dir", str(work.root), "judge", plan_id, "--judges",
                    str(judges), "--run-id", "D", "--batch-size", "40", "--no-progress",
                    "--dask-address", cluster.address, *more)  # fmt: skip


def test_a_full_disk_stops_the_workers_and_the_resume_pays_nothing_twice(
    server: SimJudgeServer,
    cluster: DaskProcesses,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from tasks.judging.cache import stored_keys
    from tasks.runs.jobs import scan_records

    server.clear_log()
    judges = _judges_file(tmp_path, server)
    with tmpfs() as disk:
        work = WorkDir(disk.root / "work")
        plan_id = stage_demo_plan(work, pairs=20, k=4).plan_id  # 160 calls
        _once(lambda: sum(_paid(server).values()) >= 40, lambda: disk.leave(16 * 1024))
        stopped = _judge(work, plan_id, judges, cluster, monkeypatch)
        printed = capfd.readouterr()
        assert stopped.code == 75, (stopped.out, stopped.err)
        (line,) = stopped.err.strip().splitlines()
        assert line.startswith(
            f"run D stopped: no space left on the file system mounted at {disk.root}"
        ), line
        assert "Traceback" not in stopped.out + stopped.err + printed.out + printed.err
        kept = re.search(r"the (\d+) replies received are kept in the work dir's journal", line)
        assert kept is not None and 0 < int(kept.group(1)) < 160, line
        paid = _paid(server)
        assert sum(paid.values()) <= int(kept.group(1)) + CONCURRENCY  # stopped at once
        assert [(e.run_id, e.status) for e in scan_records(work)] == [("D", "interrupted")]
        assert cluster.files_held_under(disk.root) == {}  # no worker holds a file there

        disk.free()
        assert len(stored_keys(work)) == int(kept.group(1))  # what the resume finds first
        resumed = run_main(monkeypatch, "--work-dir", str(work.root), "rerun-failed", "D",
                           "--no-progress", "--dask-address", cluster.address)  # fmt: skip
        assert resumed.code == 0, (resumed.out, resumed.err)
        text = " ".join(resumed.out.split())
        assert f"sent {160 - int(kept.group(1))} (160 by this run in all)" in text, text
        answered = _paid(server)
        assert len(answered) == 160 and max(answered.values()) == 1, answered.most_common(3)
        assert cluster.files_held_under(disk.root) == {}


def test_a_worker_killed_mid_batch_costs_its_calls_in_flight_and_the_run_completes(
    server: SimJudgeServer, cluster: DaskProcesses, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """SIGKILL to one worker process mid-batch: Dask runs its batch again on a worker that
    lives; that batch first publishes the dead worker's journal, so only the calls the dead
    worker had in flight (its share of the judge's concurrency) are paid again."""
    import signal

    server.clear_log()
    work = WorkDir(tmp_path / "work")
    plan_id = stage_demo_plan(work, pairs=20, k=4).plan_id  # 160 calls
    victim = cluster.workers()[0]
    _once(lambda: sum(_paid(server).values()) >= 40, lambda: victim.send_signal(signal.SIGKILL))
    done = _judge(work, plan_id, _judges_file(tmp_path, server), cluster, monkeypatch)
    assert done.code == 0, (done.out, done.err)
    assert not victim.is_running()
    said = " ".join(done.out.split())
    # The calls the dead worker stored count as this run's, not as another run's.
    assert "(160 distinct, 0 cached)" in said and "stored 160, failed 0, pending 0" in said, said
    assert "stored by another run" not in said, said
    paid = _paid(server)
    assert len(paid) == 160
    # Each batch runs with its share of the judge's concurrency: 4 over 2 worker threads.
    assert sum(paid.values()) - 160 <= CONCURRENCY // 2, paid.most_common(3)
    cluster.wait_for_workers(2)  # the nanny started another
