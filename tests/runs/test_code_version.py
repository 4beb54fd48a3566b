"""A run record's code version: git's commit and dirtiness of the judgeline tree, asked at
once or started early by a command that makes a record (`start_code_version`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tasks.runs import record as runrecord
from tasks.runs.record import REPO, code_version, start_code_version


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(not (REPO / ".git").exists() or not shutil.which("git"), reason="no git tree")
def test_the_code_version_started_early_is_the_one_asked_at_once() -> None:
    asked = code_version()
    assert asked.commit == _git("rev-parse", "HEAD")
    assert asked.dirty == bool(_git("status", "--porcelain", "--untracked-files=no"))
    start_code_version()
    early = runrecord._started
    assert early is not None and all(p is not None for p in early)
    assert code_version() == asked
    assert runrecord._started is None  # used once: the next record asks git again
    assert all(p is not None and p.returncode is not None for p in early)


def test_without_git_the_version_names_no_commit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no git here
    start_code_version()
    version = code_version()
    assert version.commit is None and version.dirty is None
    assert version.packages["pyarrow"]
