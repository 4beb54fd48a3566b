"""Stopping the judge stage on a signal: no call starts after it, the replies in flight are
stored, calls in flight past the grace period are abandoned, and a resume pays nothing twice."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support import stage_demo_plan

from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.errors import Interrupted
from tasks.judging.cache import stored_keys
from tasks.judging.request import JudgeRequest
from tasks.judging.stage import run_judge_stage
from tasks.judging.stopping import StopRequest
from tasks.store.workdir import WorkDir

CONCURRENCY = 4


def test_calls_in_flight_finish_within_the_grace_and_later_ones_are_abandoned() -> None:
    async def scenario() -> tuple[str | None, str | None, float]:
        stop = StopRequest(grace_s=0.3)
        on_time = asyncio.ensure_future(stop.guard(asyncio.sleep(0.05, "on time")))
        late = asyncio.ensure_future(stop.guard(asyncio.sleep(30, "late")))
        await asyncio.sleep(0.01)
        started = time.monotonic()
        stop.request(signal.SIGTERM)
        assert stop.requested
        return await on_time, await late, time.monotonic() - started

    on_time, late, took = asyncio.run(scenario())
    assert on_time == "on time"
    assert late is None
    assert took < 5


def test_a_second_signal_exits_at_once() -> None:
    script = (
        "import asyncio, signal\n"
        "from tasks.judging.stopping import StopRequest\n"
        "async def main():\n"
        "    stop = StopRequest(grace_s=60)\n"
        "    stop.request(signal.SIGINT)\n"
        "    stop.request(signal.SIGINT)\n"
        "    print('still running')\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 130, done.stderr
    assert "still running" not in done.stdout
    assert "SIGINT again: exiting at once" in done.stderr


@pytest.mark.slow
def test_sigint_mid_stage_stores_what_was_in_flight_and_resume_pays_nothing_twice(
    tmp_path: Path,
) -> None:
    persona = Persona(name="steady", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=100)
    with SimJudgeServer([persona]) as server:
        work = WorkDir(tmp_path / "work")
        plan_id = stage_demo_plan(work, pairs=20, k=4).plan_id
        judge = JudgeSpec.model_validate(
            {"name": "steady-judge", "base_url": server.base_url, "simulated": True,
             "model": "steady", "max_concurrency": CONCURRENCY}
        )  # fmt: skip
        request = JudgeRequest(work=work, run_id="r", plan_id=plan_id, judges=(judge,))
        seen_at_signal: list[int] = []

        def interrupt() -> None:
            while len(server.request_log()) < 8:
                time.sleep(0.01)
            seen_at_signal.append(len(server.request_log()))
            os.kill(os.getpid(), signal.SIGINT)

        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(Interrupted) as caught:
            asyncio.run(run_judge_stage(request))
        assert caught.value.exit_code == 130 and caught.value.run_id == "r"
        assert "interrupted by SIGINT" in str(caught.value)

        log = server.request_log()
        # No call started after the signal: only those in flight then were answered.
        assert len(log) - seen_at_signal[0] <= CONCURRENCY
        received = {e["call_key"] for e in log if e["status"] == 200}
        assert received == stored_keys(work)
        calls = pq.read_table(work.run_dir("r") / "calls.parquet").to_pydict()
        status = Counter(calls["status"])
        planned = len(calls["status"])
        assert status["stored"] == len(received) and status["pending"] == planned - len(received)
        assert caught.value.counts["pending"] == status["pending"]

        counts = asyncio.run(run_judge_stage(request))
        assert counts["stored"] == counts["planned"] == planned
        paid = Counter(e["call_key"] for e in server.request_log() if e["status"] == 200)
        assert max(paid.values()) == 1
