"""The warm worker (flows.worker, flows.handoff): a command that runs a flow hands its job
to a process that already imported Prefect and the flows, and ends as the job ended.

- The job runs in the worker, not in the command (the command spends almost no CPU), with
  the command's output, exit code and Prefect home.
- A killed command takes its job down; signals reach the job (tests/flows/test_interrupt.py
  sends Ctrl-C to a handed-off `judge`).
- The worker stops when idle or asked, declines when its code changed on disk or a command's
  limits are beyond its own, and never serves with a thread running.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from support import REPO, stage_demo_plan, warm_worker

from flows import handoff, worker
from flows.handoff import flow_command
from schemas.judge import JudgeSpec
from tasks.simjudge.persona import Persona
from tasks.simjudge.server import SimJudgeServer
from tasks.workdir import WorkDir

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
MAP = "pair_id=pair_id,question=question,answer_a=a,answer_b=b,reply=reply,order=order"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.pop("JUDGELINE_WORK_DIR", None)
    env.update(extra)
    return env


def _table(path: Path) -> Path:
    lines = ["pair_id,question,a,b,reply,order"]
    lines += [f"p{i},Question {i}?,yes {i},no {i},My final verdict is [[A>B]].,{order}"
              for i in range(3) for order in ("AB", "BA")]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def _timed(
    command: list[str], env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], float]:
    """The finished command and the CPU seconds it (and its own children) used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _same_lines(text: str) -> str:
    return re.sub(r"\d{8}T\d{6}Z-[0-9a-f]{6}|/work-\w+/", "X", text)


@pytest.mark.slow
def test_a_flow_command_runs_in_the_warm_worker_as_it_would_in_the_command(
    tmp_path: Path,
) -> None:
    before = warm_worker()
    table = _table(tmp_path / "judgments.csv")

    def imported(work: str, **extra: str) -> tuple[subprocess.CompletedProcess[str], float]:
        command = [JUDGELINE, "--work-dir", str(tmp_path / work), "import", "table", str(table),
                   "--map", MAP, "--judge", "j"]  # fmt: skip
        return _timed(command, _env(**extra))

    handed, cpu = imported("work-warm")
    assert handed.returncode == 0, handed.stdout + handed.stderr
    after = handoff.worker_status()
    assert after is not None and after["pid"] == before["pid"]
    assert int(after["taken"]) > int(before["taken"])  # type: ignore[call-overload]
    # The command itself only waited: importing Prefect alone takes more than a second.
    assert cpu < 0.5, cpu
    # Its Prefect client used the command's Prefect home, not the worker's own.
    worker_home = Path(os.environ["XDG_CACHE_HOME"]) / "judgeline" / "worker-prefect-home"
    assert not (worker_home / "prefect.db").exists()

    here, cpu_here = imported("work-here", JUDGELINE_WORKER="0")
    assert here.returncode == 0, here.stdout + here.stderr
    assert cpu_here > 1.0, cpu_here
    assert _same_lines(handed.stdout) == _same_lines(here.stdout)
    assert handed.stderr == here.stderr == ""
    # Usage lines name the command, not the worker's module.
    helps = [
        subprocess.run(
            [JUDGELINE, "run", "--help"],
            env=_env(**extra),
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
        for extra in ({}, {"JUDGELINE_WORKER": "0"})
    ]
    assert "Usage: judgeline run" in helps[0].stdout, helps[0].stdout
    assert helps[0].stdout == helps[1].stdout


@pytest.mark.slow
def test_a_refused_input_exits_2_from_the_worker(tmp_path: Path) -> None:
    warm_worker()
    config = tmp_path / "run.yaml"
    config.write_text("judges: [not a judge]\n")
    done, cpu = _timed([JUDGELINE, "--work-dir", str(tmp_path / "w"), "run", str(config)], _env())
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("error:") and str(config) in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert cpu < 0.5, cpu


@pytest.mark.slow
def test_a_killed_command_takes_its_job_down(tmp_path: Path) -> None:
    persona = Persona(name="slow", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=300)
    with SimJudgeServer([persona]) as server:
        work = WorkDir(tmp_path / "work")
        plan_id = stage_demo_plan(work, pairs=20, k=4).plan_id
        judge = JudgeSpec.model_validate(
            {"name": "slow-judge", "base_url": server.base_url, "simulated": True,
             "model": "slow", "max_concurrency": 2}
        )  # fmt: skip
        judges = tmp_path / "judges.yaml"
        judges.write_text(yaml.safe_dump({"judges": [judge.model_dump(mode="json")]}))
        warm_worker()
        command = [JUDGELINE, "--work-dir", str(work.root), "judge", plan_id, "--judges",
                   str(judges), "--no-progress"]  # fmt: skip
        proc = subprocess.Popen(command, env=_env(), start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        deadline = time.monotonic() + 120
        while len(server.request_log()) < 6:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no judge call within 120 s"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        time.sleep(2.0)  # the worker sees the closed connection at once
        sent = len(server.request_log())
        time.sleep(2.0)
        assert len(server.request_log()) == sent, "the job went on after its command died"
        assert sent < 160


def test_flow_commands_are_told_from_the_others() -> None:
    assert flow_command(["run", "x.yaml"])
    assert flow_command(["--work-dir", "w", "--debug", "import", "judgebench", "f"])
    assert flow_command(["--work-dir=w", "rerun-failed", "r"])
    assert not flow_command(["--work-dir", "run", "runs"])  # `run` is the option's value
    assert not flow_command(["runs"])
    assert not flow_command(["--help"])
    assert not flow_command(["serve", "x.yaml"])
    assert not flow_command([])


def test_a_changed_module_makes_the_worker_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "judgeline_stale_probe.py"
    module.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(worker, "_PROJECT", tmp_path)
    import judgeline_stale_probe  # noqa: F401

    try:
        stamp = worker._code_stamp()
        assert str(module) in stamp
        assert worker._code_stamp() == stamp
        os.utime(module, ns=(time.time_ns(), time.time_ns() + 1_000_000))
        assert worker._code_stamp() != stamp
    finally:
        sys.modules.pop("judgeline_stale_probe", None)


def test_limits_beyond_the_workers_are_declined() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert worker._can_limit({"RLIMIT_NOFILE": [soft, hard]})
    if hard != resource.RLIM_INFINITY:
        assert not worker._can_limit({"RLIMIT_NOFILE": [soft, hard + 1]})
        assert not worker._can_limit({"RLIMIT_NOFILE": [soft, resource.RLIM_INFINITY]})
    assert worker._can_limit({"RLIMIT_NOFILE": [min(soft, 64), min(hard, 64)]})


def _own_worker(tmp_path: Path, idle_s: float) -> tuple[subprocess.Popen[bytes], bytes]:
    """A worker under a name of its own (not this installation's), ready to answer."""
    name = b"\0judgeline-worker-test-" + os.urandom(6).hex().encode()
    proc = subprocess.Popen(
        [sys.executable, "-m", "flows.worker", name.hex()],
        env=_env(JUDGELINE_WORKER_IDLE_SECONDS=str(idle_s), PREFECT_HOME=str(tmp_path / "ph")),
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while handoff.ask("status", name) is None:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the worker did not answer within 120 s"
        time.sleep(0.1)
    return proc, name


@pytest.mark.slow
def test_the_worker_stops_when_idle_and_when_asked(tmp_path: Path) -> None:
    idle, _ = _own_worker(tmp_path, idle_s=2)
    assert idle.wait(timeout=30) == 0, "the worker outlived its idle period"
    asked, name = _own_worker(tmp_path, idle_s=600)
    status = handoff.ask("status", name)
    assert status is not None and status["pid"] == asked.pid and status["taken"] == 0
    answer = handoff.ask("stop", name)
    assert answer is not None and answer["pid"] == asked.pid
    assert asked.wait(timeout=30) == 0
    assert handoff.ask("status", name) is None
    out = asked.stdout.read().decode() if asked.stdout else ""
    assert f"worker {asked.pid}" in out and "ready in" in out, out


def test_a_cache_folder_that_cannot_be_written_only_means_no_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command that starts the worker does so as it exits: a failure there must not
    print a traceback after a job that succeeded."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert handoff.spawn() is None
