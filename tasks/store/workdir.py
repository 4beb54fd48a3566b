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
                               (every file named by tasks.runs.folder.RunFolder)
  warehouse.duckdb             rebuildable views over the parquet files

A work dir may also be an object store URL (`s3://bucket/prefix`, `gs://`, `az://`): the same
layout lives in the store, `root` is this machine's read-through copy of it under the scratch
dir (`tasks.store`), and claims, locks and journals are objects with leases instead of locked
files. `.gates/` and `warehouse.duckdb` are this machine's own (`local`).
"""

from __future__ import annotations

import atexit
import errno
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tasks.errors import InputError, StoreError
from tasks.store import Store, is_store_url, open_object_store, store_of

DEFAULT_WORK_DIR = Path("work")
WAREHOUSE_FILE: Final = "warehouse.duckdb"
_PRIVATE_WAREHOUSES: dict[Path, Path] = {}
"""The warehouse this process built in a temporary folder, per work dir it cannot write."""

CANNOT_WRITE: Final = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
"""The errors of a place this process may read but not write (a read-only mount, no write
permission, an immutable file)."""


def cannot_write(exc: OSError) -> bool:
    """Whether `exc` says the place cannot be written (`CANNOT_WRITE`), not that it failed."""
    return exc.errno in CANNOT_WRITE


FULL: Final = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errors of a file system (or a quota) with no space left."""


def disk_full(exc: BaseException | None) -> bool:
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


def default_address() -> str:
    """The work dir a command uses when given none: $JUDGELINE_WORK_DIR, else ./work (a
    commands prints `--work-dir` only for another one)."""
    chosen = os.environ.get("JUDGELINE_WORK_DIR") or DEFAULT_WORK_DIR
    return str(chosen).rstrip("/") if is_store_url(chosen) else str(Path(chosen).resolve())


@dataclass(frozen=True)
class WorkDir:
    """Paths under one work directory; creates folders on demand (where it may write),
    never files."""

    root: Path
    store: Store = field(default_factory=Store, compare=False, repr=False)
    """Where the files live (`tasks.store`): the local filesystem unless an object store."""
    url: str | None = None
    """The object store's URL, for a work dir on one (`root` is then its local copy)."""
    scratch: Path | None = None
    """This machine's folder for an object store's work dir (the copy and local state)."""

    @classmethod
    def at(
        cls,
        root: str | os.PathLike[str] | None = None,
        *,
        scratch: str | os.PathLike[str] | None = None,
    ) -> WorkDir:
        """The work dir at `root`, else $JUDGELINE_WORK_DIR, else ./work. An object store
        URL opens that store, its local copy under `scratch` (`tasks.store.scratch_dir`);
        the path of a store's local copy names that store again."""
        chosen = root or os.environ.get("JUDGELINE_WORK_DIR") or DEFAULT_WORK_DIR
        if is_store_url(chosen):
            return _on_store(open_object_store(str(chosen), scratch))
        path = Path(chosen).resolve()
        owner = store_of(path)
        if owner.remote and path == getattr(owner, "root", None):
            return _on_store(owner)
        return cls(path)

    @property
    def address(self) -> str:
        """The work dir as every process names it: its path, or the store's URL."""
        return self.url or str(self.root)

    @property
    def local(self) -> Path:
        """This machine's own state for the work dir (gate memos, the warehouse, Prefect's
        home): the work dir itself, or the scratch folder of an object store."""
        return self.scratch or self.root

    def location(self, path: Path) -> str:
        """A file of the work dir as a person should be told: its path or its URL."""
        return self.store.location(path)

    def fresh(self, *parts: str, pattern: str = "*") -> Path:
        """The folder `parts` with the store's files matching `pattern` (`*` crosses
        folders) brought into the local copy first; a local work dir's folder as it is."""
        path = self.root.joinpath(*parts)
        if self.store.remote:
            self.store.refresh(path, pattern)
        return path

    def _written_once(self, kind: str, name: str, sidecar: str) -> Path:
        """A write-once folder, complete once its sidecar is there: a complete copy is never
        listed again."""
        path = self.root / kind / name
        if self.store.remote and not (path / sidecar).is_file():
            self.fresh(kind, name)
        return path

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
        """A manifest's folder (from the store first, unless its copy is complete)."""
        return self._written_once("manifests", manifest_hash, "manifest.json")

    @property
    def plans(self) -> Path:
        return self._dir("plans")

    def plan_dir(self, plan_id: str) -> Path:
        """A plan's folder (from the store first, unless its copy is complete)."""
        return self._written_once("plans", plan_id, "plan.json")

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
        path = self.local / ".gates"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def runs(self) -> Path:
        return self._dir("runs")

    def run_dir(self, run_id: str) -> Path:
        """A run's folder, not created (writers use `tasks.runs.folder.RunFolder.create`)."""
        return self.root / "runs" / run_id

    @property
    def warehouse(self) -> Path:
        """The warehouse file readers open and builders replace: in `local`, or for a work
        dir this process cannot write (a read-only mount), `private_warehouse`'s."""
        private = _PRIVATE_WAREHOUSES.get(self.root)
        if private is not None:
            return private
        try:
            self.local.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if not cannot_write(exc):
                raise
        return self.local / WAREHOUSE_FILE

    def private_warehouse(self) -> Path:
        """A warehouse file in a temporary folder of this process's own (deleted when it
        exits), for a work dir it cannot write; `warehouse` names it from then on."""
        folder = Path(tempfile.mkdtemp(prefix="judgeline-warehouse-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        target = _PRIVATE_WAREHOUSES[self.root] = folder / WAREHOUSE_FILE
        return target


def _on_store(store: Store) -> WorkDir:
    from tasks.store.objects import ObjectStore

    assert isinstance(store, ObjectStore)
    return WorkDir(store.root, store, url=store.url, scratch=store.state)


def open_work_dir(address: str | None) -> WorkDir:
    """The work dir a command names (`WorkDir.at`), or an InputError saying why an object
    store URL cannot be opened (an unknown scheme option, a malformed URL)."""
    try:
        return WorkDir.at(address)
    except StoreError as exc:
        raise InputError(f"cannot open work dir {address}: {exc}") from None


def check_work_dir(work: WorkDir) -> None:
    """Refuse a work dir that is a file or lies under one (every command checks this first;
    a missing work dir is made by the commands that write). An object store is checked
    when a command first writes to it (`check_writable`)."""
    if work.url is not None:
        return
    path = work.root
    while not path.exists() and path.parent != path:
        path = path.parent
    if not path.is_dir():
        raise InputError(f"not usable as a work dir ({path} is not a folder)", file=str(work.root))


def check_writable(work: WorkDir) -> None:
    """Before a job that writes: a probe written, read and deleted in the work dir's store
    (the store's own reason if not: credentials, a missing bucket) and in its local folder,
    or an InputError saying why it cannot be written."""
    if work.url is not None:
        from tasks.store.objects import ObjectStore

        assert isinstance(work.store, ObjectStore)
        try:
            work.store.check_access()
        except StoreError as exc:
            raise InputError(
                f"work dir {work.url} cannot be written: {exc}. Credentials come from the "
                "environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL and "
                "AWS_ALLOW_HTTP=true for an http endpoint; GOOGLE_APPLICATION_CREDENTIALS; "
                "AZURE_STORAGE_ACCOUNT_NAME and a key or token), a task role or web identity, "
                "or with JUDGELINE_INSTANCE_CREDENTIALS=true the machine's own role"
            ) from None
    try:
        work.root.mkdir(parents=True, exist_ok=True)
        probe = work.root / f".judgeline-write-check.{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InputError(
            f"not usable as a work dir: it cannot be written ({exc.strerror})",
            file=str(work.root),
        ) from None
