"""Run records from the command line: a refused process leaves another's run alone, every
job that judges writes one, and `runs` tells damaged and interrupted runs apart."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

import pytest
from support import REPO

from schemas.run import CodeVersion, RunRecord
from tasks.judging.claims import RunLock
from tasks.runrecord import write_record
from tasks.workdir import WorkDir

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
CONFIG = """name: mine
datasets: [{kind: demo}]
judges: [{name: j, base_url: 'http://127.0.0.1:9/v1', model: m}]
k: 2
"""


def judgeline(
    work: WorkDir, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "COLUMNS")}
    env.pop("JUDGELINE_WORK_DIR", None)
    return subprocess.run(
        [JUDGELINE, "--work-dir", str(work.root), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def running_record(run_id: str) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        name="mine",
        status="running",
        config_hash="h",
        config={},
        code=CodeVersion(commit=None, dirty=None, packages={}),
        started_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )


@pytest.mark.slow
def test_a_refused_run_leaves_the_running_record_alone(work: WorkDir, tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text(CONFIG, "utf-8")
    record = write_record(work, running_record("X"))
    before = record.read_bytes()
    with RunLock(work, "X"):  # another process is running X
        result = judgeline(work, "run", str(config), "--run-id", "X")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "being judged by another process" in result.stderr
    assert record.read_bytes() == before
