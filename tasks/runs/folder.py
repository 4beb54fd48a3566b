"""One run's folder, `runs/<run_id>/`: the name of every file in it, and its metadata.

Every stage finds a run's files through `RunFolder`, never through a literal file name.
Reading never creates anything; a writer calls `create()` first (writing a table into the
folder also creates it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from schemas.run import RunInfo, RunRecord
from tasks.errors import InputError, IntegrityError, describe_validation
from tasks.storage import write_json_atomic
from tasks.store.workdir import WorkDir

__all__ = [
    "INFO_FILE",
    "LOCK_FILE",
    "RECORD_FILE",
    "REPORT_FILE",
    "RUN_ID_RULE",
    "TABLE_FILES",
    "RunFolder",
    "check_run_id",
    "is_run_id",
    "parse_record",
]

RECORD_FILE: Final = "record.json"
INFO_FILE: Final = "run.json"
REPORT_FILE: Final = "report.html"
LOCK_FILE: Final = ".lock"
TABLE_FILES: Final = {
    name: f"{name}.parquet"
    for name in (
        "calls",
        "labels",
        "outcomes",
        "dispositions",
        "disclosure",
        "replay",
        "summary",
        "design",
        "components",
        "live",
        "live_summary",
        "live_draws",
        "advice",
        "imported",
    )
}
"""Each table a run can hold, by name: `calls` is `calls.parquet`, and so on."""

_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
RUN_ID_RULE: Final = (
    "a run id is one folder name: 1 to 128 ASCII letters, digits, '.', '_' and '-', "
    "starting with a letter or a digit"
)


def is_run_id(name: str) -> bool:
    """Whether `name` is a run id: one safe path segment (`RUN_ID_RULE`), never `..`, a
    path, a hidden name, an option-like `-x`, blanks or control characters."""
    return _RUN_ID.fullmatch(name) is not None


def check_run_id(run_id: str) -> str:
    """`run_id` if it is a run id, else an InputError naming it (every command that takes a
    run id checks it before anything is written or sent; `RunFolder.create` checks again)."""
    if not is_run_id(run_id):
        raise InputError(f"{run_id!r} is not a usable run id: {RUN_ID_RULE}")
    return run_id


def parse_record(path: Path, run_id: str) -> RunRecord:
    """The record in `path`, the record file of run `run_id`: ValueError if it does not read
    or names another run (a copied folder, or a planted one: readers would follow its id)."""
    record = RunRecord.model_validate_json(path.read_text("utf-8"))
    if record.run_id != run_id:
        raise ValueError(f"it names run {record.run_id!r}, not its folder's")
    return record


@dataclass(frozen=True)
class RunFolder:
    """The files of one run under a work directory (paths only; nothing is created). A name
    that is not a run id is refused here, before any path is made of it: every reader and
    writer of a run comes through this class, so none can be led outside `runs/`."""

    work: WorkDir
    run_id: str

    def __post_init__(self) -> None:
        check_run_id(self.run_id)

    @property
    def path(self) -> Path:
        """The run's folder; on an object store its files are brought into the local copy
        first (at most once a second: `tasks.store.objects.FRESH_S`)."""
        path = self.work.root / "runs" / self.run_id
        self.work.store.refresh(path)
        return path

    def exists(self) -> bool:
        return self.path.is_dir()

    def create(self) -> RunFolder:
        """Make the folder (and `runs/`) if missing; for writers."""
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    def table(self, name: str) -> Path:
        """The parquet file of table `name` (a key of TABLE_FILES)."""
        return self.path / TABLE_FILES[name]

    @property
    def record(self) -> Path:
        return self.path / RECORD_FILE

    @property
    def info(self) -> Path:
        return self.path / INFO_FILE

    @property
    def calls(self) -> Path:
        return self.table("calls")

    @property
    def outcomes(self) -> Path:
        return self.table("outcomes")

    @property
    def disclosure(self) -> Path:
        return self.table("disclosure")

    @property
    def summary(self) -> Path:
        return self.table("summary")

    @property
    def live(self) -> Path:
        return self.table("live")

    @property
    def live_summary(self) -> Path:
        return self.table("live_summary")

    @property
    def live_draws(self) -> Path:
        return self.table("live_draws")

    @property
    def report(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def lock(self) -> Path:
        return self.path / LOCK_FILE

    # --- metadata ---------------------------------------------------------------------------

    def read_info(self) -> RunInfo:
        """The run's `run.json`, or an InputError naming the missing or unreadable file."""
        path = self.info
        if not path.is_file():
            raise InputError(f"no run {self.run_id!r}: {path} does not exist")
        try:
            return RunInfo.model_validate_json(path.read_bytes())
        except ValueError as exc:
            problem = f"not a run file (needs plan_id and manifest_hash): {exc}"
            raise InputError(problem, file=str(path)) from None

    def find_info(self) -> RunInfo | None:
        """The run's `run.json` if there is a readable one, else None."""
        try:
            return RunInfo.model_validate_json(self.info.read_bytes())
        except (OSError, ValueError):
            return None

    def write_info(self, info: RunInfo) -> Path:
        """Write (replace) the run's `run.json` atomically."""
        write_json_atomic(info.dump(), self.create().info, overwrite=True)
        return self.info

    def read_record(self) -> RunRecord:
        """The run's `record.json`, or an InputError naming the run."""
        path = self.record
        if not path.is_file():
            raise InputError(
                f"no run {self.run_id!r} in {self.work.address} ({path} does not exist)"
            )
        try:
            return parse_record(path, self.run_id)
        except (OSError, ValueError) as exc:
            raise IntegrityError(
                f"run {self.run_id!r}: {path} is damaged and cannot be read "
                f"({describe_validation(exc)}); the run's other files are untouched"
            ) from exc

    def write_record(self, record: RunRecord) -> Path:
        """Write (replace) the run's `record.json` atomically."""
        write_json_atomic(record.model_dump(mode="json"), self.create().record, overwrite=True)
        return self.record
