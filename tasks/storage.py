"""Atomic, write-once files: a temporary file in the same folder, fsync, then link or rename.

The last step is the owning store's publish (`tasks.store.store_of`): on a local disk a link
or rename, on an object store a (conditional) PUT and then the rename into its local copy.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel

from tasks.store import store_of

InfoT = TypeVar("InfoT", bound=BaseModel)
T = TypeVar("T")


SHARE_REPORTS = "JUDGELINE_SHARE_REPORTS"
"""Set to 1 to write reports readable by whoever the umask lets read (0644 under umask
022); otherwise they are 0600, as every other file of a run."""

PRIVATE: Final = 0o600


def report_mode() -> int:
    """The mode a report is created with: 0o666 when `SHARE_REPORTS` is set (the umask then
    takes away what it takes away), else PRIVATE. A report holds questions, answers and
    replies, so sharing it is the user's choice, never the default."""
    return 0o666 if os.environ.get(SHARE_REPORTS, "") not in ("", "0") else PRIVATE


def _temp_beside(path: Path, mode: int = PRIVATE) -> Path:
    """A new empty file beside `path` (never a link planted there), created with `mode`
    less the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(tmp, flags, mode))
            return tmp
        except FileExistsError:
            continue


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _publish(tmp: Path, path: Path, *, overwrite: bool) -> bool:
    """Move a finished temp file into place. Without overwrite, an existing file wins and
    False is returned, so two writers never clobber each other."""
    return store_of(path).publish(tmp, path, overwrite=overwrite)


def read_parquet(path: Path, columns: list[str] | None = None) -> pa.Table:
    """A local parquet file's table (only `columns`, if given), read without pyarrow's
    dataset layer: `pq.read_table` costs about 0.6 ms more a file (and its first call
    imports `pyarrow.dataset`). A file that does not read is an error naming it."""
    try:
        with pq.ParquetFile(path) as file:
            return file.read(columns=columns)
    except pa.ArrowInvalid as exc:
        raise pa.ArrowInvalid(f"{path}: {exc}") from exc


def write_parquet_atomic(table: pa.Table, path: Path, *, overwrite: bool = False) -> bool:
    """Write a parquet file atomically; returns False if it existed and overwrite is off."""
    tmp = _temp_beside(path)
    try:
        # Our own file handle, closed whatever happens: pyarrow leaves the file it opened
        # open when the write fails (a full disk), holding the space of the deleted file.
        with pa.OSFile(str(tmp), "wb") as sink:
            pq.write_table(table, sink, compression="zstd")
        _fsync(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return _publish(tmp, path, overwrite=overwrite)


@contextmanager
def parquet_writer_atomic(
    path: Path, schema: pa.Schema, **options: Any
) -> Iterator[pq.ParquetWriter]:
    """A parquet writer whose file appears at `path` (replacing it) only once the block ends
    without error, as `write_parquet_atomic` with overwrite: for tables written batch by batch.
    `options` go to `pq.ParquetWriter` (zstd compression unless they say otherwise)."""
    tmp = _temp_beside(path)
    try:
        with (
            pa.OSFile(str(tmp), "wb") as sink,
            pq.ParquetWriter(sink, schema, **{"compression": "zstd", **options}) as writer,
        ):
            yield writer
        _fsync(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _publish(tmp, path, overwrite=True)


def write_text_atomic(
    text: str,
    path: Path,
    *,
    overwrite: bool = False,
    mode: int = PRIVATE,
    unless_same: bool = False,
) -> bool:
    """Write a UTF-8 text file atomically (created with `mode` less the umask); returns
    False if it existed and overwrite is off. With `unless_same`, a file that already holds
    exactly `text` is left as it is (a read that rebuilds a page writes nothing)."""
    if unless_same:
        try:
            if path.read_bytes() == text.encode("utf-8"):
                return True
        except OSError:
            pass
    tmp = _temp_beside(path, mode)
    try:
        tmp.write_text(text, "utf-8")
        _fsync(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return _publish(tmp, path, overwrite=overwrite)


def write_json_atomic(value: Any, path: Path, *, overwrite: bool = False) -> bool:
    """Write a JSON file atomically; returns False if it existed and overwrite is off."""
    tmp = _temp_beside(path)
    try:
        tmp.write_text(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n", "utf-8")
        _fsync(tmp)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return _publish(tmp, path, overwrite=overwrite)


def read_stored_folder(
    folder: Path,
    *,
    kind: str,
    name: str,
    info_file: str,
    info_model: type[InfoT],
    id_field: str,
    table_file: str,
    row_model: type[BaseModel],
) -> tuple[InfoT, pa.Table]:
    """Read a write-once folder (a JSON sidecar and a parquet table) without gating it.

    The sidecar must name the folder (`id_field` equals `name`) and the table must be a
    `row_model` table; anything else is an IntegrityError naming the `kind` and the file.
    """
    from pydantic import ValidationError

    from schemas import conform
    from tasks.errors import IntegrityError, describe_validation

    info_path, table_path = folder / info_file, folder / table_file
    for path in (info_path, table_path):
        if not path.is_file():
            raise IntegrityError(f"{kind} {name}: {path} is missing (incomplete {kind})")
    try:
        info = info_model.model_validate_json(info_path.read_text("utf-8"))
    except (ValidationError, ValueError) as exc:
        raise IntegrityError(
            f"{kind} {name}: {info_path} is not a {kind} sidecar: {describe_validation(exc)}"
        ) from exc
    if getattr(info, id_field) != name:
        raise IntegrityError(
            f"{kind} {name}: {info_path} says {id_field} {getattr(info, id_field)}, "
            "not the folder's name"
        )
    try:
        table = conform(read_parquet(table_path), row_model, where=str(table_path))
    except (ValueError, OSError, pa.ArrowException) as exc:
        raise IntegrityError(f"{kind} {name}: {exc}") from exc
    return info, table


def publish_folder_once(
    final: Path,
    *,
    table: pa.Table | Callable[[], pa.Table],
    table_file: str,
    info: BaseModel,
    info_file: str,
    check: Callable[[Path], None],
    verify_existing: Callable[[], T],
) -> T | None:
    """Publish a write-once folder of a parquet table and its JSON sidecar: both go into a
    staging folder beside `final`, `check` reads them back from it (raising if they fail),
    then the staging folder is renamed into place in one step, so `final` is either
    complete and checked or absent.

    `table` may be a function making the table: it is then made when it is written and
    not held while `check` reads the staged copy (a large table is in memory once).

    Returns None when this call published the folder. If `final` already stands (before,
    or because another writer renamed theirs into place first: rename never replaces a
    non-empty folder), returns `verify_existing()`, which must raise if the stored folder
    differs from what this call would have written.
    """
    store = store_of(final)
    if store.folder_stands(final, complete_with=info_file):
        return verify_existing()
    staging = final.parent / f".staging-{final.name[:16]}-{uuid.uuid4().hex}"
    try:
        if callable(table):
            write_parquet_atomic(table(), staging / table_file)
            pa.default_memory_pool().release_unused()  # Arrow's allocator keeps freed pages
        else:
            write_parquet_atomic(table, staging / table_file)
        write_json_atomic(info.model_dump(mode="json"), staging / info_file)
        check(staging)
        if not store.publish_folder(staging, final, complete_with=info_file):
            return verify_existing()
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return None


def published_folders(root: Path, info_file: str) -> list[Path]:
    """The folders `publish_folder_once` published in `root`, by name: those holding their
    sidecar `info_file` (staging folders, whose names start with a dot, are not; on an
    object store a folder whose writer died between its two files lacks the sidecar); none
    if `root` does not exist."""
    if not root.is_dir():
        return []
    store = store_of(root)
    return sorted(
        p
        for p in root.iterdir()
        if p.is_dir()
        and not p.name.startswith(".")
        and store.folder_stands(p, complete_with=info_file)
    )


class FolderChanges:
    """Whether a folder may have changed since the last look, from its mtime alone (a stat
    of microseconds instead of a listing).

    Creating, renaming or deleting a file changes the folder's mtime, except a change
    within the same clock tick as the mtime seen at the last look (file systems stamp
    times from a clock with a tick of a few ms); so until the folder had been quiet for
    `SETTLE_NS` at a look, `changed()` keeps saying yes. Call `looking()` just before
    listing the folder.
    """

    SETTLE_NS = 20_000_000

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._mtime = -1
        self._settled = False

    def changed(self) -> bool:
        return not self._settled or os.stat(self.folder).st_mtime_ns != self._mtime

    def looking(self) -> None:
        now = time.time_ns()
        self._mtime = os.stat(self.folder).st_mtime_ns
        self._settled = now - self._mtime > self.SETTLE_NS
