"""Crash safety of the judge stage: SIGKILL mid-run, resume, lose nothing already paid for."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import copy_stored_plans, stage_demo_plan

from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.judging.cache import read_replies, stored_keys
from tasks.store.workdir import WorkDir

REPO = Path(__file__).resolve().parents[2]
KILLS = 3
RUN_ID = "crash"
# Slow enough that one run takes several seconds of sending (240 calls at ~25 calls/s), so
# every kill lands mid-run; replies are a pure function of the request, latency included.
PERSONA = Persona(name="slow", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=150)
CONCURRENCY = 4


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer([PERSONA]) as srv:
        yield srv


def _judges(server: SimJudgeServer, concurrency: int) -> list[JudgeSpec]:
    return [
        JudgeSpec.model_validate(
            {
                "name": "slow-judge",
                "base_url": server.base_url,
                "simulated": True,
                "model": "slow",
                "max_concurrency": concurrency,
                "configs": [
                    {"name": "low", "extra": {"reasoning_effort": "low"}},
                    {"name": "high", "extra": {"reasoning_effort": "high"}},
                ],
            }
        )
    ]


def _judges_file(path: Path, judges: list[JudgeSpec]) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"judges": [j.model_dump(mode="json") for j in judges]}))
    return path


def _start(work: WorkDir, plan_id: str, judges_file: Path) -> subprocess.Popen[bytes]:
    """`judgeline judge` in its own process group, on the session's Prefect server."""
    from prefect.settings import PREFECT_API_URL

    env = {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "PYTHONPATH": str(REPO),
    }
    command = [sys.executable, "-c", "from flows.cli import main; main()"]
    command += ["--work-dir", str(work.root), "judge", plan_id, "--judges", str(judges_file)]
    command += ["--run-id", RUN_ID, "--no-progress"]
    return subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _reply_files(work: WorkDir) -> set[str]:
    return {p.name for p in work.replies.glob("*.parquet")}


def _snapshot(work: WorkDir) -> dict[str, str]:
    table = read_replies(work).select(["call_key", "raw_reply"]).to_pydict()
    return dict(zip(table["call_key"], table["raw_reply"], strict=True))


def _kill_mid_run(proc: subprocess.Popen[bytes], work: WorkDir, rng: random.Random) -> None:
    """SIGKILL the run's process group at a random moment after it stored a new reply file."""
    before = _reply_files(work)
    deadline = time.monotonic() + 120
    while not (_reply_files(work) - before):
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            pytest.fail(f"the run ended before it could be killed (status {proc.returncode}):\n"
                        f"{output[-3000:]}")  # fmt: skip
        assert time.monotonic() < deadline, "the run stored no reply within 120 s"
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 1.2))
    assert proc.poll() is None, "the run finished before the kill: make it slower"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()


def _log_time(entry: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(entry["time"])


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_sigkill_mid_run_three_times_then_resume_loses_nothing(
    server: SimJudgeServer, tmp_path: Path
) -> None:
    work = WorkDir(tmp_path / "killed")
    plan_id = stage_demo_plan(work, pairs=30, k=2).plan_id  # 120 presentations
    judges_file = _judges_file(tmp_path / "judges.yaml", _judges(server, CONCURRENCY))
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    server.clear_log()

    snapshots: list[tuple[dict[str, str], int]] = []
    for _ in range(KILLS):
        proc = _start(work, plan_id, judges_file)
        _kill_mid_run(proc, work, rng)
        stored = _snapshot(work)
        previous = snapshots[-1][0] if snapshots else {}
        assert len(stored) > len(previous), "a life stored nothing before its kill"
        snapshots.append((stored, len(server.request_log())))

    proc = _start(work, plan_id, judges_file)
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, output.decode()[-3000:]
    final = _snapshot(work)
    log = server.request_log()

    # 1. Every reply stored before a kill is still there, byte for byte.
    for stored, _ in snapshots:
        assert {k: final.get(k) for k in stored} == stored
    # 2. No call key with a stored reply was requested again: not after any snapshot...
    for stored, seen in snapshots:
        again = [e["call_key"] for e in log[seen:] if e["call_key"] in stored]
        assert again == [], f"{len(again)} stored calls were requested again"
    # ... and not after the moment its reply was received, over the whole run.
    received = read_replies(work).select(["call_key", "received_at"]).to_pydict()
    first_reply = dict(zip(received["call_key"], received["received_at"], strict=True))
    late = [e for e in log if e["call_key"] in first_reply and
            _log_time(e) > first_reply[e["call_key"]]]  # fmt: skip
    assert late == []
    # 3. Only calls in flight at a kill were paid for twice: a reply received before a kill
    # but not yet flushed survives in the dead process's journal.
    paid = Counter(e["call_key"] for e in log if e["status"] == 200 and e["fault"] is None)
    assert sum(n - 1 for n in paid.values()) <= KILLS * CONCURRENCY, paid.most_common(3)
    # Killed lives leave at most temporary files, which no reader takes for data; their
    # journals are published by the resumed run.
    assert not list(work.quarantine.iterdir())
    leftovers = [p for p in work.replies.iterdir() if p.suffix != ".parquet"]
    assert all(p.name.startswith(".") and p.suffix == ".tmp" for p in leftovers), leftovers
    assert list(work.journal.iterdir()) == []

    # 4. The tables equal those of an uninterrupted run against the same judge.
    fresh = WorkDir(tmp_path / "fresh")
    copy_stored_plans(work, fresh)
    from flows.stageflows import judge_flow

    # Concurrency is not part of a call key: the reference run may go faster.
    counts = asyncio.run(
        judge_flow(
            run_id=RUN_ID,
            plan_id=plan_id,
            judges=_judges(server, 32),
            work_dir=str(fresh.root),
        )
    )
    assert counts["stored"] == counts["planned"] == 240
    killed_calls = pq.read_table(work.run_dir(RUN_ID) / "calls.parquet")
    fresh_calls = pq.read_table(fresh.run_dir(RUN_ID) / "calls.parquet")
    assert killed_calls.equals(fresh_calls)
    assert final == _snapshot(fresh)
    assert stored_keys(work) == set(killed_calls.column("call_key").to_pylist())

    from tasks.remap.outcomes import remap_run

    killed_outcomes = remap_run(work, RUN_ID).outcomes
    assert killed_outcomes.equals(remap_run(fresh, RUN_ID).outcomes)
    assert killed_outcomes.num_rows == 240
