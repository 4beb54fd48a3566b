"""Concurrent judge runs on one work dir: same run id refuses, different runs cooperate;
corrupt cache files are quarantined without losing the others."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import StagedPlan, stage_demo_plan

from schemas.calls import ReplyRecord
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.errors import InputError
from tasks.judging.cache import read_replies, stored_keys
from tasks.judging.claims import RunLock
from tasks.store.workdir import WorkDir

REPO = Path(__file__).resolve().parents[2]
PERSONA = Persona(name="slow", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=100)
CONCURRENCY = 4


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer([PERSONA]) as srv:
        yield srv


@pytest.fixture(scope="module")
def _stored_plan(tmp_path_factory: pytest.TempPathFactory) -> StagedPlan:
    """30 demo pairs and their full K = 2 grid (120 presentations), stored once."""
    return stage_demo_plan(WorkDir(tmp_path_factory.mktemp("concurrent") / "work"), pairs=30, k=2)


@pytest.fixture
def staged(_stored_plan: StagedPlan, work: WorkDir) -> tuple[WorkDir, str]:
    """The stored plan in a fresh work dir: every test starts with an empty cache."""
    return _stored_plan.copy_to(work).work, _stored_plan.plan_id


def _judge(server: SimJudgeServer, configs: int = 2) -> JudgeSpec:
    return JudgeSpec.model_validate(
        {
            "name": "slow-judge",
            "base_url": server.base_url,
            "simulated": True,
            "model": "slow",
            "max_concurrency": CONCURRENCY,
            "configs": [
                {"name": e, "extra": {"reasoning_effort": e}} for e in ["low", "high"][:configs]
            ],
        }
    )


def _judges_file(path: Path, judge: JudgeSpec) -> Path:
    import yaml

    path.write_text(yaml.safe_dump({"judges": [judge.model_dump(mode="json")]}))
    return path


def _start(work: WorkDir, plan_id: str, judges: Path, run_id: str) -> subprocess.Popen[str]:
    """`judgeline judge` in a subprocess, on the session's Prefect server."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", "from flows.cli import main; main()"]
    command += ["--work-dir", str(work.root), "judge", plan_id, "--judges", str(judges)]
    command += ["--run-id", run_id, "--no-progress"]
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> str:
    output, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, output[-3000:]
    return output


def _paid(log: list[dict[str, Any]]) -> Counter[str]:
    """Replies the judge delivered (and a provider would bill), per call key."""
    return Counter(e["call_key"] for e in log if e["status"] == 200 and e["fault"] is None)


# --- one run id, one process -------------------------------------------------------------


def test_run_lock_refuses_names_the_holder_and_can_wait(work: WorkDir) -> None:
    with RunLock(work, "r1"):
        with pytest.raises(InputError) as refused:
            RunLock(work, "r1").acquire()
        message = str(refused.value)
        assert f"pid {os.getpid()}" in message and "'r1'" in message and "--run-id" in message
        assert "started 20" in message and ".lock" in message
        RunLock(work, "r2").acquire().release()  # other run ids are free

        with pytest.raises(InputError, match="after waiting 0.3 s"):
            RunLock(work, "r1", wait_s=0.3).acquire()

    holder = RunLock(work, "r1").acquire()
    threading.Timer(0.4, holder.release).start()
    started = time.monotonic()
    with RunLock(work, "r1", wait_s=10):
        assert 0.3 < time.monotonic() - started < 5


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_second_process_on_the_same_run_id_refuses_while_the_first_runs(
    server: SimJudgeServer, staged: tuple[WorkDir, str], tmp_path: Path
) -> None:
    work, plan_id = staged
    judges = _judges_file(tmp_path / "judges.yaml", _judge(server))
    server.clear_log()
    first = _start(work, plan_id, judges, "same")
    deadline = time.monotonic() + 180
    while not list(work.replies.glob("*.parquet")):  # the first run is sending
        assert first.poll() is None and time.monotonic() < deadline, "first run did not send"
        time.sleep(0.05)
    # Hold the first run mid-way while the second starts (a slower think time does not
    # change any reply), then let it finish.
    server.judge.personas["slow"] = PERSONA.model_copy(update={"latency_ms": 3000})
    try:
        second = _start(work, plan_id, judges, "same")
        output, _ = second.communicate(timeout=180)
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        server.judge.personas["slow"] = PERSONA
    assert second.returncode == 2, output
    assert "is being judged by another process" in output and f"pid {first.pid}" in output
    _finish(first)
    # The refused process sent nothing: each call was paid exactly once.
    assert set(_paid(server.request_log()).values()) == {1}
    assert len(_paid(server.request_log())) == 240
    # The lock went with its holder: the same run id runs again (all cached).
    again = _start(work, plan_id, judges, "same")
    assert "sent 0 " in _finish(again)


# --- different run ids, one cache -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_two_runs_sharing_the_cache_cooperate(
    server: SimJudgeServer, staged: tuple[WorkDir, str], tmp_path: Path
) -> None:
    work, plan_id = staged
    judges = _judges_file(tmp_path / "judges.yaml", _judge(server))
    server.clear_log()
    runs = ("left", "right")
    procs = [_start(work, plan_id, judges, run_id) for run_id in runs]
    outputs = [_finish(p) for p in procs]
    paid = _paid(server.request_log())

    # Every call is stored, every cache file is whole, nothing was quarantined.
    calls = {r: pq.read_table(work.run_dir(r) / "calls.parquet") for r in ("left", "right")}
    keys = set(calls["left"].column("call_key").to_pylist())
    assert len(keys) == 240 and set(paid) == keys and stored_keys(work) == keys
    for path in [*work.replies.glob("*.parquet"), *work.attempts.glob("*.parquet")]:
        pq.read_table(path)
    assert not list(work.quarantine.iterdir())
    for table in calls.values():
        assert set(table.column("status").to_pylist()) == {"stored"}
    assert calls["left"].drop(["run_id"]).equals(calls["right"].drop(["run_id"]))

    # Each call was paid for once: a call the other run was sending waited for its claim
    # and found the reply stored. Both runs sent some of them, and left no journal behind.
    assert max(paid.values()) == 1, (paid.most_common(3), outputs)
    sent = [int(o.split(" sent ")[1].split()[0]) for o in outputs]
    assert sum(sent) == 240 and min(sent) > 0, sent
    # Each run found every call stored at its start, sent it, or found it stored by the
    # other run while it waited for that run's claim.
    for run_id in runs:
        c = json.loads((work.run_dir(run_id) / "run.json").read_text())["counts"]
        assert c["cached"] + c["sent"] + c["stored_by_other_runs"] == 240, c
    assert list(work.journal.iterdir()) == []


# --- corrupt cache files ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_corrupt_cache_file_is_quarantined_reported_and_only_its_calls_resent(
    server: SimJudgeServer,
    staged: tuple[WorkDir, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from flows.stageflows import judge_flow

    work, plan_id = staged
    judge = _judge(server, configs=1)  # 120 calls over ~3 s: a reply file a second

    def run(run_id: str) -> dict[str, Any]:
        return asyncio.run(
            judge_flow(run_id=run_id, plan_id=plan_id, judges=[judge], work_dir=str(work.root))
        )

    # Cut one of the run's reply files short; leave a temporary file as a kill would.
    assert run("whole")["stored"] == 120
    files = sorted(work.replies.glob("*.parquet"), key=lambda p: p.stat().st_mtime)
    assert len(files) >= 2, "need several reply files"
    victim = files[0]
    lost = set(pq.read_table(victim, columns=["call_key"]).column("call_key").to_pylist())
    kept = {k: v for k, v in _texts(work).items() if k not in lost}
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    (work.replies / ".left-by-a-kill.parquet.x1y2.tmp").write_bytes(b"half a file")

    server.clear_log()
    caplog.clear()
    # Reported as a warning of the cache's logger (on stderr through Prefect's handler in a
    # CLI run), naming both paths. Captured at that logger itself: Prefect's logging set-up
    # at a process's first flow run replaces the root handlers, pytest's among them.
    cache_log = logging.getLogger("tasks.judging.cache")
    cache_log.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.WARNING, logger="tasks.judging.cache"):
            counts = run("after-corruption")
    finally:
        cache_log.removeHandler(caplog.handler)
    reported = caplog.text
    assert "could not be read" in reported and victim.name in reported
    assert str(work.quarantine) in reported
    assert (work.quarantine / f"replies-{victim.name}").exists() and not victim.exists()
    # Only the calls of the broken file were sent again; every other reply is kept as it was.
    assert sorted(e["call_key"] for e in server.request_log()) == sorted(lost)
    assert counts["sent"] == len(lost) and counts["stored"] == 120
    texts = _texts(work)
    assert {k: texts[k] for k in kept} == kept and set(texts) == set(kept) | lost


def _reply(key: str) -> ReplyRecord:
    return ReplyRecord(
        call_key=key,
        provider="openai",
        model="m",
        raw_reply="[[A>B]]",
        latency_ms=1.0,
        received_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )


def _texts(work: WorkDir) -> dict[str, str]:
    table = read_replies(work).select(["call_key", "raw_reply"]).to_pydict()
    return dict(zip(table["call_key"], table["raw_reply"], strict=True))


def test_a_nestable_run_lock_is_taken_again_by_its_process_only(work: WorkDir) -> None:
    outer = RunLock(work, "r1", nestable=True).acquire()
    with RunLock(work, "r1"):  # a stage inside the flow that holds it
        pass
    with RunLock(work, "r1"):  # still held by the outer holder after the inner release
        pass
    outer.release()
    with RunLock(work, "r1"), pytest.raises(InputError, match="'r1'"):
        RunLock(work, "r1").acquire()  # released for good: plain locks refuse again
