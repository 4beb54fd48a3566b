"""A `judgeline run` killed (SIGKILL) in its judge stage, sending directly or waiting for a
provider batch: `runs` names one command, and that command completes the run paying for
nothing twice beyond the calls in flight at the kill."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import NO_FAULTS, REPO

from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.runs.record import read_record
from tasks.store.workdir import WorkDir

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
CONCURRENCY = 2
PERSONA = Persona(name="steady", skill=0.8, left_bias=0.2, tie_rate=0.1, latency_ms=300)
SUBMIT_PATHS = {"/v1/batches", "/v1/messages/batches"}


@pytest.fixture()
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer([PERSONA]) as srv:
        srv.set_faults(**NO_FAULTS)
        yield srv


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "COLUMNS")}
    env.pop("JUDGELINE_WORK_DIR", None)
    return env


def _config(tmp_path: Path, server: SimJudgeServer, *, batch: bool) -> Path:
    table = tmp_path / "pairs.csv"
    table.write_text("q,a,b\n" + "".join(f"Question {i}?,yes {i},no {i}\n" for i in range(6)))
    judge = {"name": "j", "base_url": server.base_url, "model": "steady", "simulated": True,
             "max_concurrency": CONCURRENCY, "batch": batch}  # fmt: skip
    config = {
        "name": "resumable",
        "datasets": [
            {"kind": "table", "path": str(table), "mapping": "question=q,answer_a=a,answer_b=b"}
        ],  # fmt: skip
        "judges": [judge],
        "k": 2,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _killed_mid_judging(
    work: WorkDir, config: Path, server: SimJudgeServer, *, batch: bool
) -> None:
    command = [JUDGELINE, "--work-dir", str(work.root), "run", str(config)]
    proc = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 240
    while True:
        log = server.request_log()
        if batch and any(e["path"] in SUBMIT_PATHS for e in log):
            break
        if not batch and len(log) >= 4:
            break
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it was killed: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "no judge call within 240 s"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    if proc.stderr is not None:
        proc.stderr.close()


@pytest.mark.slow
@pytest.mark.parametrize("batch", [False, True], ids=["direct", "batch"])
def test_a_run_killed_while_judging_resumes_with_the_command_runs_prints(
    server: SimJudgeServer, tmp_path: Path, batch: bool
) -> None:
    if batch:
        server.judge.batches.settings.delay_s = 3.0  # the batch is pending at the kill
    work = WorkDir(tmp_path / "work")
    config = _config(tmp_path, server, batch=batch)
    _killed_mid_judging(work, config, server, batch=batch)
    submitted = [e["path"] for e in server.request_log() if e["path"] in SUBMIT_PATHS]

    listed = subprocess.run([JUDGELINE, "--work-dir", str(work.root), "runs"], env=_env(),
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    found = re.search(r"`(judgeline [^`]*rerun-failed (\S+))` takes it up again", listed.stdout)
    assert found is not None, listed.stdout
    assert " interrupted " in listed.stdout, listed.stdout
    run_id = found.group(2)

    command = [JUDGELINE, *shlex.split(found.group(1))[1:]]
    resumed = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Traceback" not in resumed.stderr
    record = read_record(work, run_id)
    assert record.status == "completed"
    assert record.calls["stored"] == record.calls["planned"] == 24, record.calls
    answered = Counter(e["call_key"] for e in server.request_log()
                       if e.get("call_key") and e["status"] == 200)  # fmt: skip
    paid_twice = sum(n - 1 for n in answered.values())
    if batch:
        # Polled again, never submitted again; each call answered once, in the batch.
        now = [e["path"] for e in server.request_log() if e["path"] in SUBMIT_PATHS]
        assert now == submitted and paid_twice == 0
    else:
        assert paid_twice <= CONCURRENCY, answered.most_common(3)
