"""`judgeline run` processes that share only an S3 work dir (moto on loopback), each with a
scratch dir of its own: two judging the same plan at once pay for every call once; one
killed by SIGKILL is taken up by `rerun-failed` from a third, paying again only for the
calls it had in flight; Dask workers that share only the store."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import NO_FAULTS, REPO, stage_demo_plan

from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.errors import JudgelineError
from tasks.judging.cache import stored_keys
from tasks.runs.folder import RunFolder
from tasks.runs.record import read_record
from tasks.store import SCRATCH_ENV
from tasks.store.leases import LEASE_ENV
from tasks.store.workdir import WorkDir

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
CONCURRENCY = 3
PAIRS, K = 8, 2
CALLS = PAIRS * K * 2
PERSONA = Persona(name="steady", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=150)


@pytest.fixture()
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer([PERSONA]) as srv:
        srv.set_faults(**NO_FAULTS)
        yield srv


def _config(tmp_path: Path, server: SimJudgeServer) -> Path:
    table = tmp_path / "pairs.csv"
    rows = "".join(f"Question {i}?,yes {i},no {i}\n" for i in range(PAIRS))
    table.write_text("q,a,b\n" + rows)
    judge = {"name": "j", "base_url": server.base_url, "model": "steady", "simulated": True,
             "max_concurrency": CONCURRENCY}  # fmt: skip
    config = {
        "name": "shared",
        "datasets": [
            {"kind": "table", "path": str(table), "mapping": "question=q,answer_a=a,answer_b=b"}
        ],  # fmt: skip
        "judges": [judge],
        "k": K,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _env(scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "COLUMNS")}
    env.pop("JUDGELINE_WORK_DIR", None)
    # A dead writer's claims expire in seconds, not the default half minute.
    return {**env, SCRATCH_ENV: str(scratch), LEASE_ENV: "3"}


def _start(url: str, scratch: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([JUDGELINE, "--work-dir", url, *args], env=_env(scratch),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def _finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, out + err
    assert "Traceback" not in err, err
    return out


def _recorded(url: str, tmp_path: Path, run_id: str) -> bool:
    """Whether the run's record is in the store (what another machine would list)."""
    try:
        read_record(WorkDir.at(url, scratch=tmp_path / "probe"), run_id)
    except JudgelineError:
        return False
    return True


def _answered(server: SimJudgeServer) -> Counter[str]:
    """Replies the simulated judge sent, by call key: what was paid for."""
    log = server.request_log()
    return Counter(e["call_key"] for e in log if e.get("call_key") and e["status"] == 200)


@pytest.mark.slow
def test_two_runs_on_one_store_pay_for_every_call_once(
    server: SimJudgeServer, bucket_url: str, tmp_path: Path
) -> None:
    config = _config(tmp_path, server)
    runs = [_start(bucket_url, tmp_path / f"scratch-{n}", "run", str(config), "--run-id", n)
            for n in ("one", "two")]  # fmt: skip
    outputs = [_finish(p) for p in runs]
    assert all(f"report: {bucket_url}/runs/" in out for out in outputs)
    answered = _answered(server)
    assert len(answered) == CALLS and max(answered.values()) == 1, answered.most_common(3)
    work = WorkDir.at(bucket_url, scratch=tmp_path / "reader")
    for run_id in ("one", "two"):
        record = read_record(work, run_id)
        assert record.status == "completed"
        assert record.calls["stored"] == record.calls["planned"] == CALLS
    both = [read_record(work, r).calls for r in ("one", "two")]
    assert sum(c["sent"] for c in both) == CALLS, both


@pytest.mark.slow
def test_a_killed_run_is_taken_up_from_another_machine_paying_only_for_calls_in_flight(
    server: SimJudgeServer, bucket_url: str, tmp_path: Path
) -> None:
    config = _config(tmp_path, server)
    killed = _start(bucket_url, tmp_path / "scratch-a", "run", str(config), "--run-id", "a")
    other = _start(bucket_url, tmp_path / "scratch-b", "run", str(config), "--run-id", "b")
    deadline = time.monotonic() + 240
    # Killed once a third of the calls were answered and run a is under way (its record in
    # the store): the other run may have sent all of that third while a was still starting.
    while len(server.request_log()) < CALLS // 3 or not _recorded(bucket_url, tmp_path, "a"):
        assert killed.poll() is None, killed.communicate()
        assert time.monotonic() < deadline, "no judge calls within 240 s"
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.communicate(timeout=30)
    _finish(other)  # waits out the dead writer's claims, sends the rest

    third = tmp_path / "scratch-c"
    # Run a's record shows it interrupted once its lease (3 s here) has run out.
    deadline = time.monotonic() + 60
    while "interrupted" not in (listed := _finish(_start(bucket_url, third, "runs"))):
        assert time.monotonic() < deadline, listed
        time.sleep(1)
    assert "rerun-failed a" in listed, listed
    _finish(_start(bucket_url, third, "rerun-failed", "a"))

    work = WorkDir.at(bucket_url, scratch=tmp_path / "reader")
    for run_id in ("a", "b"):
        record = read_record(work, run_id)
        assert record.status == "completed", (run_id, record.status)
        assert record.calls["stored"] == record.calls["planned"] == CALLS
    answered = _answered(server)
    paid_twice = sum(n - 1 for n in answered.values())
    assert len(answered) == CALLS  # nothing lost
    assert paid_twice <= CONCURRENCY, answered.most_common(5)  # the calls in flight at most
    print(f"\npaid twice after the kill: {paid_twice} of {CALLS} calls")


# --- Dask ----------------------------------------------------------------------------------


@pytest.fixture()
def cluster(s3_server: Any, tmp_path: Path) -> Iterator[Any]:
    """Two worker processes whose scratch dir is their own: they share only the store."""
    from distributed import LocalCluster

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SCRATCH_ENV, str(tmp_path / "worker-scratch"))
        with LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
        ) as local:
            yield local


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_dask_workers_that_share_only_the_store_send_each_call_once(
    server: SimJudgeServer,
    cluster: Any,
    bucket_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.stageflows import judge_flow

    monkeypatch.setenv(SCRATCH_ENV, str(tmp_path / "flow-scratch"))
    work = WorkDir.at(bucket_url)
    staged = stage_demo_plan(work, pairs=PAIRS, k=K)
    judge = JudgeSpec.model_validate({"name": "j", "base_url": server.base_url,
                                      "simulated": True, "model": "steady",
                                      "max_concurrency": 4})  # fmt: skip
    counts = asyncio.run(
        judge_flow(
            run_id="dask",
            plan_id=staged.plan_id,
            judges=[judge],
            template_id="arena-hard-v1",
            work_dir=bucket_url,
            batch_size=8,
            dask_address=cluster.scheduler_address,
        )  # fmt: skip
    )
    assert counts["sent"] == counts["stored"] == counts["planned"] == CALLS
    answered = _answered(server)
    assert len(answered) == CALLS and max(answered.values()) == 1
    # The workers read the plan through their own copies, not the flow's.
    copies = list((tmp_path / "worker-scratch").glob(f"*/work/plans/{staged.plan_id}/plan.json"))
    assert len(copies) == 1
    reader = WorkDir.at(bucket_url, scratch=tmp_path / "reader")
    assert len(stored_keys(reader)) == CALLS
    assert RunFolder(reader, "dask").calls.is_file()
