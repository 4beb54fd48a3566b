"""Run records: new run ids, the code version, outcome counts, and `record.json`."""

from __future__ import annotations

import atexit
import datetime as dt
import os
import secrets
import subprocess
from importlib import metadata
from pathlib import Path

import pyarrow.compute as pc

from schemas.run import CodeVersion, RunRecord
from schemas.vocabulary import OUTCOMES
from tasks.runs.folder import RECORD_FILE, RunFolder, is_run_id, parse_record
from tasks.storage import read_parquet
from tasks.store.workdir import WorkDir

PACKAGES = ("judgeline", "prefect", "pandas", "pyarrow", "duckdb", "httpx", "pydantic", "numpy")
REPO = Path(__file__).resolve().parents[1]


def new_run_id(now: dt.datetime | None = None) -> str:
    """A sortable, unique run id: UTC time plus random hex."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


_GIT = (("rev-parse", "HEAD"), ("status", "--porcelain", "--untracked-files=no"))
"""The git commands `code_version` reads: the commit, and whether tracked files changed."""

_started: list[subprocess.Popen[str] | None] | None = None


def _spawn_git() -> list[subprocess.Popen[str] | None]:
    # `git status` runs beside the command: it takes no lock on the index (git's advice for
    # background processes), so a user's own git command never finds the index locked.
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    procs: list[subprocess.Popen[str] | None] = []
    for args in _GIT:
        try:
            procs.append(subprocess.Popen(["git", *args], cwd=REPO, text=True, env=env,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL))  # fmt: skip
        except OSError:
            procs.append(None)
    return procs


def _answer(proc: subprocess.Popen[str] | None) -> str | None:
    if proc is None:
        return None
    try:
        out, _ = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    return out.strip() if proc.returncode == 0 else None


def start_code_version() -> None:
    """Start the git commands the next `code_version` reads, so that they run while the
    command goes on (a command that makes a run record calls this before it imports its
    flows: the commands then cost it nothing, instead of about 70 ms)."""
    global _started
    if _started is None:
        _started = _spawn_git()


@atexit.register
def _reap() -> None:
    """A command that ended before its record was made waits for the git commands it
    started (a few milliseconds): none is left behind."""
    for proc in _started or []:
        if proc is not None:
            _answer(proc)


def code_version() -> CodeVersion:
    """The project's git commit and dirtiness, and the versions of packages that matter
    (git asked now, or by the last `start_code_version`)."""
    global _started
    procs, _started = _started or _spawn_git(), None
    commit, status = (_answer(p) for p in procs)
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return CodeVersion(
        commit=commit, dirty=None if status is None or not commit else bool(status),
        packages=packages,
    )  # fmt: skip


def write_record(work: WorkDir, record: RunRecord) -> Path:
    """Write (replace) a run's record.json atomically."""
    return RunFolder(work, record.run_id).write_record(record)


def read_record(work: WorkDir, run_id: str) -> RunRecord:
    """A run's record, or an error naming the run."""
    return RunFolder(work, run_id).read_record()


def outcome_counts(folder: RunFolder) -> dict[str, int]:
    """The count of every outcome code in a run's outcomes table (for its record)."""
    column = read_parquet(folder.outcomes, columns=["outcome"]).column("outcome")
    counted = pc.value_counts(column)
    values, counts = counted.field("values").to_pylist(), counted.field("counts").to_pylist()
    found = dict(zip(values, counts, strict=True))
    return {code: found.get(code, 0) for code in OUTCOMES}


def list_records(work: WorkDir) -> list[RunRecord]:
    """Every run's record, newest first; unreadable records and foreign folders (names that
    are not run ids) are skipped."""
    records = []
    for path in sorted(work.fresh("runs", pattern=f"*/{RECORD_FILE}").glob(f"*/{RECORD_FILE}")):
        if not is_run_id(path.parent.name):
            continue
        try:
            records.append(parse_record(path, path.parent.name))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: r.started_at, reverse=True)
