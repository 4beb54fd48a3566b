"""A `judgeline judge` process SIGKILLed while it waits for its provider batch resumes by
polling that batch: the simulated judge's request log shows nothing submitted twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from support import NO_FAULTS, stage_demo_plan

from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.judging.batch_api import BatchJournal
from tasks.judging.cache import stored_keys
from tasks.store.workdir import WorkDir

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-batch-kill-31"
SUBMIT_PATHS = {"/v1/batches", "/v1/messages/batches"}


@pytest.fixture()
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(api_key=KEY) as srv:
        srv.set_faults(**NO_FAULTS, max_faults_per_request=None)
        yield srv


def _judges(server: SimJudgeServer) -> list[JudgeSpec]:
    common = {"simulated": True, "api_key_env": "JUDGELINE_BATCH_KILL_KEY", "batch": True}
    root = server.base_url.removesuffix("/v1")
    return [
        JudgeSpec.model_validate({"name": "gpt", "base_url": server.base_url,
                                  "model": "strong", **common}),
        JudgeSpec.model_validate({"name": "claude", "provider": "anthropic", "base_url": root,
                                  "model": "left-biased", **common}),
    ]  # fmt: skip


def _start(work: WorkDir, plan_id: str, judges_file: Path) -> subprocess.Popen[bytes]:
    """`judgeline judge` in its own process group, on the session's Prefect server."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", "from flows.cli import main; main()", "--work-dir",
               str(work.root), "judge", plan_id, "--judges", str(judges_file), "--run-id",
               "killed", "--no-progress"]  # fmt: skip
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip


def _submitted(folder: Path) -> int:
    """Journal entries the provider accepted (state `submitted`, with a remote id)."""
    entries = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    return sum(1 for e in entries if e.get("state") == "submitted" and e.get("batch_id"))


def _submissions(server: SimJudgeServer) -> list[str]:
    return [e["path"] for e in server.request_log() if e["path"] in SUBMIT_PATHS]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_sigkill_after_submitting_resumes_and_submits_nothing_twice(
    server: SimJudgeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGELINE_BATCH_KILL_KEY", KEY)
    work = WorkDir(tmp_path / "work")
    plan_id = stage_demo_plan(work, pairs=6, k=2).plan_id
    judges_file = tmp_path / "judges.yaml"
    judges = [j.model_dump(mode="json") for j in _judges(server)]
    judges_file.write_text(yaml.safe_dump({"judges": judges}))
    server.judge.batches.settings.delay_s = 3.0  # both batches pending at the kill
    journal = BatchJournal(work).folder

    proc = _start(work, plan_id, judges_file)
    deadline = time.monotonic() + 120
    while _submitted(journal) < 2:
        if proc.poll() is not None:
            output = proc.stdout.read().decode() if proc.stdout else ""
            pytest.fail(f"the run ended before it was killed:\n{output[-3000:]}")
        assert time.monotonic() < deadline, "no batch was submitted within 120 s"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()
    before = _submissions(server)
    assert sorted(before) == sorted(SUBMIT_PATHS) and stored_keys(work) == set()

    proc = _start(work, plan_id, judges_file)
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, output.decode()[-3000:]
    assert _submissions(server) == before  # polled again, never submitted again
    answered = Counter(e["call_key"] for e in server.request_log() if e.get("call_key"))
    assert len(answered) == len(stored_keys(work)) > 0 and set(answered.values()) == {1}
    assert not BatchJournal(work).open_entries()
