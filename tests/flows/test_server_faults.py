"""The local Prefect server stopping under a run (flows.serverwatch): SIGKILLed mid-judge, then
again while the resume starts its replacement, or stopped with `server stop --force`. Each
time the run stops sending within seconds and ends `interrupted` (exit 75) with the command
that resumes it, no traceback; `server stop` without --force refuses while the run uses the
server; and the resume completes, paying again at most the calls that were in flight.
Replies are counted by call key at the simulated judge."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml
from server_support import JUDGELINE, env_for, server_info
from support import stage_demo_plan

from flows.localserver import stop_server
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.judging.cache import stored_keys
from tasks.store.workdir import WorkDir

pytestmark = pytest.mark.slow
CONCURRENCY = 4
# 240 calls at 4 in flight and 250 ms each: about 15 s of sending, so a fault lands mid-run.
PERSONA = Persona(name="steady", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=250)
STOP_WITHIN_S = 15.0
"""From the fault to the exit: the watcher looks every second, the replies in flight take
250 ms, and the run's tables and record are written."""


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer([PERSONA]) as srv:
        yield srv


@pytest.fixture
def setting(tmp_path: Path, server: SimJudgeServer) -> Iterator[dict[str, object]]:
    """A staged plan of 240 calls, a judges file for the simulated judge, a Prefect home."""
    work = WorkDir(tmp_path / "work")
    plan_id = stage_demo_plan(work, pairs=30, k=4).plan_id
    judge = JudgeSpec.model_validate(
        {"name": "steady-judge", "base_url": server.base_url, "simulated": True,
         "model": "steady", "max_concurrency": CONCURRENCY}
    )  # fmt: skip
    judges = tmp_path / "judges.yaml"
    judges.write_text(yaml.safe_dump({"judges": [judge.model_dump(mode="json")]}))
    home = tmp_path / "home"
    server.clear_log()
    yield {"work": work, "plan_id": plan_id, "judges": judges, "home": home}
    stop_server(home)


def _paid(server: SimJudgeServer) -> Counter[str]:
    return Counter(e["call_key"] for e in server.request_log() if e["status"] == 200)


def _command(setting: dict[str, object], *args: str) -> subprocess.Popen[str]:
    work = setting["work"]
    assert isinstance(work, WorkDir) and isinstance(setting["home"], Path)
    return subprocess.Popen(
        [JUDGELINE, "--work-dir", str(work.root), *args], env=env_for(setting["home"]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _judge(setting: dict[str, object]) -> subprocess.Popen[str]:
    return _command(setting, "judge", str(setting["plan_id"]), "--judges",
                    str(setting["judges"]), "--no-progress")  # fmt: skip


def _await_calls(server: SimJudgeServer, proc: subprocess.Popen[str], n: int) -> None:
    deadline = time.monotonic() + 300
    while len(server.request_log()) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"fewer than {n} judge calls within 300 s"
        time.sleep(0.05)


def _ended(proc: subprocess.Popen[str], since: float) -> tuple[str, float]:
    out, err = proc.communicate(timeout=120)
    return out + err, time.monotonic() - since


def _interrupted(shown: str, code: int, took: float, cause: str) -> str:
    """The run's id, once its command is checked to have stopped as a lost server demands."""
    assert code == 75, shown
    assert took < STOP_WITHIN_S, (took, shown)
    assert "Traceback" not in shown and "Crash detected" not in shown, shown
    last = shown.strip().splitlines()[-1]
    assert cause in last and "resume with: judgeline" in last, shown
    found = re.search(r"rerun-failed (\S+)", last)
    assert found is not None, shown
    return found.group(1)


def _status(setting: dict[str, object], run_id: str) -> str:
    work = setting["work"]
    assert isinstance(work, WorkDir)
    return str(json.loads((work.root / "runs" / run_id / "record.json").read_text())["status"])


def _kill_while_starting(proc: subprocess.Popen[str]) -> int:
    """SIGKILL the `prefect server start` a command's supervisor runs, before it answers."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        for child in psutil.Process(proc.pid).children(recursive=True):
            try:
                if "server" in child.cmdline() and "start" in child.cmdline():
                    child.kill()
                    return child.pid
            except psutil.Error:
                continue
        time.sleep(0.05)
    raise AssertionError("no server started within 120 s")


def test_the_server_killed_mid_run_and_again_while_the_resume_starts_one(
    server: SimJudgeServer, setting: dict[str, object]
) -> None:
    proc = _judge(setting)
    _await_calls(server, proc, 20)
    home = setting["home"]
    assert isinstance(home, Path)
    info = server_info(home)
    os.kill(info.pid, signal.SIGKILL)
    shown, took = _ended(proc, time.monotonic())
    cause = f"because the local Prefect server (pid {info.pid}) stopped"
    run_id = _interrupted(shown, proc.returncode, took, cause)
    assert _status(setting, run_id) == "interrupted"
    received = _paid(server)
    work = setting["work"]
    assert isinstance(work, WorkDir)
    assert set(received) <= stored_keys(work) and 20 <= len(received) < 240

    # The resume starts a server; it is killed before it answers; another one starts.
    resume = _command(setting, "rerun-failed", run_id, "--no-progress")
    killed = _kill_while_starting(resume)
    shown, _ = _ended(resume, time.monotonic())
    assert resume.returncode == 0, shown
    assert "Traceback" not in shown and server_info(home).pid != killed
    assert _status(setting, run_id) == "completed"
    paid = _paid(server)
    assert len(paid) == 240 and stored_keys(work) >= set(paid)
    assert sum(n - 1 for n in paid.values()) <= CONCURRENCY, paid.most_common(5)


def test_server_stop_refuses_while_a_run_uses_it_and_force_stops_the_run(
    server: SimJudgeServer, setting: dict[str, object]
) -> None:
    proc = _judge(setting)
    _await_calls(server, proc, 20)
    home = setting["home"]
    assert isinstance(home, Path)
    info = server_info(home)
    refused = _command(setting, "server", "stop")
    out, err = refused.communicate(timeout=60)
    assert refused.returncode == 2, out + err
    assert f"pid {proc.pid} (" in err and "judge" in err and "--force" in err, err
    assert proc.poll() is None and psutil.pid_exists(info.pid)

    forced = _command(setting, "server", "stop", "--force")
    forced.communicate(timeout=60)
    assert forced.returncode == 0
    # The calls logged by the time the run says it sends nothing more.
    said_at: list[int] = []
    assert proc.stderr is not None
    began, lines = time.monotonic(), []
    for line in proc.stderr:
        lines.append(line)
        if "this command sends nothing more" in line:
            said_at.append(len(server.request_log()))
            break
    out, err = proc.communicate(timeout=120)
    shown, took = "".join(lines) + out + err, time.monotonic() - began
    cause = f"because the local Prefect server (pid {info.pid}) was stopped by `judgeline server"
    run_id = _interrupted(shown, proc.returncode, took, cause)
    # Nothing sent after it said it stops but the calls then in flight.
    assert said_at and len(server.request_log()) - said_at[0] <= CONCURRENCY
    assert _status(setting, run_id) == "interrupted"

    resume = _command(setting, "rerun-failed", run_id, "--no-progress")
    shown, _ = _ended(resume, time.monotonic())
    assert resume.returncode == 0, shown
    paid = _paid(server)
    assert len(paid) == 240
    assert sum(n - 1 for n in paid.values()) <= CONCURRENCY, paid.most_common(5)
