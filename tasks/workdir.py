"""The work directory's layout: where each stage's tables live.

WORK/
  manifests/<manifest_hash>/manifest.parquet, manifest.json   frozen, written once
  plans/<plan_id>/presentations.parquet, plan.json            trusted map, written once
  cache/replies/*.parquet      successful replies, immutable, content-addressed by call_key
  cache/attempts/*.parquet     every attempt (failed or not), append-only
  cache/quarantine/            cache files that failed to read, moved aside
  cache/journal/*.jsonl        replies received but not yet in replies/ (tasks.judging.journal)
  cache/claims.lock            calls being sent right now: a lock on one byte per call key
  runs/<run_id>/               one run's calls, labels, outcomes, replay, report
                               (every file named by tasks.runfolder.RunFolder)
  warehouse.duckdb             rebuildable views over the parquet files
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_WORK_DIR = Path("work")
WAREHOUSE_FILE: Final = "warehouse.duckdb"

CANNOT_WRITE: Final = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
"""The errors of a place this process may read but not write (a read-only mount, no write
permission, an immutable file)."""


def cannot_write(exc: OSError) -> bool:
    """Whether `exc` says the place cannot be written (`CANNOT_WRITE`), not that it failed."""
    return exc.errno in CANNOT_WRITE


FULL: Final = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errors of a file system (or a quota) with no space left."""


def disk_full(exc: BaseException) -> bool:
    """Whether `exc` is a write refused for want of space (`FULL`)."""
    return isinstance(exc, OSError) and exc.errno in FULL


def describe_filesystem(path: Path) -> str:
    """The file system holding `path`, for a message: its mount point and type, e.g. `the
    file system mounted at /srv (ext4)`."""
    path = path.resolve()
    while not path.exists() and path.parent != path:
        path = path.parent
    mount = path
    try:
        device = path.stat().st_dev
        while mount.parent != mount and mount.parent.stat().st_dev == device:
            mount = mount.parent
    except OSError:
        return f"the file system holding {path}"
    kind = _mount_types().get(str(mount))
    return f"the file system mounted at {mount}" + (f" ({kind})" if kind else "")


def _mount_types() -> dict[str, str]:
    """Mount point -> file system type, from /proc/self/mounts (empty where there is none)."""
    try:
        lines = Path("/proc/self/mounts").read_text("utf-8").splitlines()
    except OSError:
        return {}
    types = {}
    for line in lines:
        fields = line.split()
        if len(fields) >= 3:
            # Spaces and the like are octal escapes (`\040`) in this file.
            point = fields[1].encode().decode("unicode_escape")
            types[point] = fields[2]
    return types


@dataclass(frozen=True)
class WorkDir:
    """Paths under one work directory; creates folders on demand (where it may write),
    never files."""

    root: Path

    @classmethod
    def at(cls, root: str | os.PathLike[str] | None = None) -> WorkDir:
        """The work dir at `root`, else $JUDGELINE_WORK_DIR, else ./work."""
        chosen = root or os.environ.get("JUDGELINE_WORK_DIR") or DEFAULT_WORK_DIR
        return cls(Path(chosen).resolve())

    def _dir(self, *parts: str) -> Path:
        path = self.root.joinpath(*parts)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            # A work dir this process may only read: readers find the folder empty, and a
            # writer fails on its own file, naming it.
            if not cannot_write(exc):
                raise
        return path

    @property
    def manifests(self) -> Path:
        return self._dir("manifests")

    def manifest_dir(self, manifest_hash: str) -> Path:
        return self.manifests / manifest_hash

    @property
    def plans(self) -> Path:
        return self._dir("plans")

    def plan_dir(self, plan_id: str) -> Path:
        return self.plans / plan_id

    @property
    def replies(self) -> Path:
        return self._dir("cache", "replies")

    @property
    def attempts(self) -> Path:
        return self._dir("cache", "attempts")

    @property
    def imported(self) -> Path:
        """Where imported replies came from (`schemas.imports.ImportedReplyRecord`)."""
        return self._dir("cache", "imported")

    @property
    def quarantine(self) -> Path:
        return self._dir("cache", "quarantine")

    @property
    def journal(self) -> Path:
        return self._dir("cache", "journal")

    @property
    def claims_file(self) -> Path:
        return self._dir("cache") / "claims.lock"

    @property
    def gate_memos(self) -> Path:
        """Digests of stored bytes that passed their gate (see tasks.gates.gate_once)."""
        return self._dir(".gates")

    @property
    def runs(self) -> Path:
        return self._dir("runs")

    def run_dir(self, run_id: str) -> Path:
        """A run's folder, not created (writers use `tasks.runfolder.RunFolder.create`)."""
        return self.root / "runs" / run_id

    @property
    def warehouse(self) -> Path:
        """The warehouse file (readers open `tasks.warehouse.warehouse_path`: a work dir
        this process cannot write has its warehouse elsewhere)."""
        self.root.mkdir(parents=True, exist_ok=True)
        return self.root / WAREHOUSE_FILE
