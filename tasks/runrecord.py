"""Run records: new run ids, the code version, outcome counts, and `record.json`."""

from __future__ import annotations

import datetime as dt
import secrets
import subprocess
from importlib import metadata
from pathlib import Path

import pyarrow.compute as pc

from schemas.run import CodeVersion, RunRecord
from schemas.vocabulary import OUTCOMES
from tasks.runfolder import RECORD_FILE, RunFolder, is_run_id
from tasks.storage import read_parquet
from tasks.workdir import WorkDir

PACKAGES = ("judgeline", "prefect", "pandas", "pyarrow", "duckdb", "httpx", "pydantic", "numpy")
REPO = Path(__file__).resolve().parents[1]


def new_run_id(now: dt.datetime | None = None) -> str:
    """A sortable, unique run id: UTC time plus random hex."""
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def code_version() -> CodeVersion:
    """The project's git commit and dirtiness, and the versions of packages that matter."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    packages = {}
    for name in PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return CodeVersion(
        commit=commit, dirty=None if status is None else bool(status), packages=packages
    )


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
            records.append(RunRecord.model_validate_json(path.read_text("utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: r.started_at, reverse=True)
