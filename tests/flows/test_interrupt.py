"""Ctrl-C and SIGTERM on `judgeline judge`, sent the way a terminal or a process manager
sends them: to the whole process group of a command that started the work dir's local
Prefect server.

Either signal stops the command within seconds, prints one line saying what it kept and
how to resume, exits 130 (SIGINT) or 143 (SIGTERM), and resuming pays for no call twice: every reply
received before the stop was stored. The local server runs in a session of its own: the
signal never reaches it, and the next command uses it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import REPO, stage_demo_plan

from flows.localserver import stop_server
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.judging.cache import stored_keys
from tasks.judging.request import JudgeRequest
from tasks.judging.stage import run_judge_stage
from tasks.store.workdir import WorkDir

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
RUN_ID = "stopped"
# 240 calls at 4 in flight and 250 ms each: about 15 s of sending, so the stop lands mid-run.
PERSONA = Persona(name="steady", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=250)
STOP_WITHIN_S = 20.0
"""From the signal to the exit: the replies in flight take 250 ms, the grace is 10 s."""


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer([PERSONA]) as srv:
        yield srv


def _judge(server: SimJudgeServer) -> JudgeSpec:
    return JudgeSpec.model_validate(
        {"name": "steady-judge", "base_url": server.base_url, "simulated": True,
         "model": "steady", "max_concurrency": 4}
    )  # fmt: skip


def _local_servers(home: Path) -> list[int]:
    """Pids of the live local Prefect server of this Prefect home and its supervisor."""
    from flows.localserver import ServerFiles
    from tasks.store.processes import same_process

    info = ServerFiles(home).read()
    if info is None or not same_process(info.pid, info.started):
        return []
    return [info.pid, info.supervisor]


def _paid(server: SimJudgeServer) -> Counter[str]:
    return Counter(e["call_key"] for e in server.request_log() if e["status"] == 200)


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_the_process_group_stops_cleanly_and_pays_nothing_twice(
    server: SimJudgeServer, tmp_path: Path, signum: int, code: int
) -> None:
    work = WorkDir(tmp_path / "work")
    plan_id = stage_demo_plan(work, pairs=30, k=4).plan_id
    judge = _judge(server)
    judges_file = tmp_path / "judges.yaml"
    judges_file.write_text(yaml.safe_dump({"judges": [judge.model_dump(mode="json")]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.pop("JUDGELINE_WORK_DIR", None)
    env["XDG_STATE_HOME"] = str(tmp_path / "state")  # the user's Prefect home is there
    home = tmp_path / "state" / "judgeline" / "prefect"
    server.clear_log()
    command = [JUDGELINE, "--work-dir", str(work.root), "judge", plan_id]
    command += ["--judges", str(judges_file), "--no-progress"]
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while len(server.request_log()) < 20:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no judge call within 300 s"
            time.sleep(0.05)
        servers = _local_servers(home)
        assert len(servers) == 2, servers
        os.killpg(proc.pid, signum)
        signalled = time.monotonic()
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    shown = out + err
    assert proc.returncode == code, shown
    assert took < STOP_WITHIN_S, (took, shown)
    assert "Traceback" not in shown and "Crash detected" not in shown, shown
    assert len(shown.strip().splitlines()) <= 2, shown
    name = signal.Signals(signum).name
    last = err.strip().splitlines()[-1]
    assert f"interrupted by {name}" in last and "resume with: judgeline" in last, shown
    assert "rerun-failed run-" in last and str(work.root) in last, shown

    # The signal did not reach the local server; it stays for the next command.
    assert _local_servers(home) == servers
    stop_server(home)
    assert _local_servers(home) == []

    # Every reply the judge sent before the stop is stored; most calls were never sent.
    received = _paid(server)
    assert set(received) == stored_keys(work)
    assert 20 <= len(received) < 240

    # Resuming (here without Prefect) sends only the rest, each call once.
    run_id = last.split("rerun-failed ")[1].split()[0]
    request = JudgeRequest(work=work, run_id=run_id, plan_id=plan_id, judges=(judge,))
    counts = asyncio.run(run_judge_stage(request))
    assert counts["stored"] == counts["planned"] == 240
    paid = _paid(server)
    assert sum(n - 1 for n in paid.values()) == 0, paid.most_common(3)
    # The resumed run keeps what it sent before the stop: it reused nothing from others.
    assert counts["sent_now"] == 240 - len(received) and counts["sent"] == 240
    assert counts["cached"] == 0
