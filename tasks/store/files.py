"""The file operations of a work dir, local or on an object store, and which store owns a path.

Every stage reads a work dir's files as local files under `WorkDir.root` and writes them
through `tasks.storage` (a finished temporary file is published in one step). `LocalStore`
does that on the local filesystem, as the work dir always did. An object store
(`tasks.store.objects.ObjectStore`) keeps a local copy of the files it has read under a
scratch dir: publishing a file puts it into the store first (a write-once file with a
conditional create), and `refresh` brings a folder of the store into the copy before it is
read. `store_of(path)` names the store that owns a local path, so the atomic writers need no
work dir argument: a path under no object store's copy is a local one.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["LocalStore", "Store", "provide", "register_copy", "store_of"]

MADE: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {}
"""How each kind of store makes a thing whose kind depends on where files live, by role."""


def provide(role: str, *, local: Callable[..., Any], objects: Callable[..., Any]) -> None:
    """Say how a local folder and an object store each make `role` (a stage's call claims,
    its journal, ...): `Store.made` picks the one of the work dir's store, so no caller asks
    where the files are."""
    MADE[role] = (local, objects)


class Store:
    """A work dir's files on the local filesystem (the default store)."""

    remote: ClassVar[bool] = False
    """Whether files live elsewhere and `root` holds a read-through copy of them."""

    def made(self, role: str, *args: Any, **kwargs: Any) -> Any:
        """The `role` this store's files need (`provide`), made with these arguments."""
        return MADE[role][0](*args, **kwargs)

    def lock_key(self, path: Path) -> str:
        """One name per lock, whatever path leads to it."""
        return os.path.realpath(path)

    def publish(self, tmp: Path, path: Path, *, overwrite: bool) -> bool:
        """Move a finished temp file into place. Without overwrite, an existing file wins and
        False is returned (os.link fails if the target exists, so two writers never clobber)."""
        try:
            if overwrite:
                os.replace(tmp, path)
                return True
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def folder_stands(self, final: Path, *, complete_with: str) -> bool:
        """Whether a write-once folder was published (a local folder appears whole)."""
        return final.exists()

    def publish_folder(self, staging: Path, final: Path, *, complete_with: str) -> bool:
        """Rename a finished staging folder to `final` in one step; False if another writer's
        folder stood there (rename never replaces a non-empty folder; a folder holding none
        of the staged files is in the way: an error). `complete_with` is the file an object
        store puts last (a folder without it there is unfinished)."""
        try:
            os.rename(staging, final)
        except OSError:
            if not any((final / p.name).exists() for p in staging.iterdir()):
                raise
            return False
        return True

    def remove(self, path: Path) -> None:
        """Delete a file (absent: nothing to do)."""
        path.unlink(missing_ok=True)

    def move(self, path: Path, target: Path) -> bool:
        """Move a file to `target`; False if it was gone already."""
        try:
            shutil.move(str(path), target)
        except FileNotFoundError:
            return False
        return True

    def refresh(self, folder: Path, pattern: str = "*", *, force: bool = False) -> None:
        """Bring the files of `folder` matching `pattern` (a glob relative to it) up to date
        in the local copy; local files are always up to date."""

    def location(self, path: Path) -> str:
        """Where a file is, as a person should be told (a path, or the store's URL)."""
        return str(path)

    def reached_by_the_flow(self) -> None:
        """This process (a Dask worker) works for a flow that reached the store: a local disk
        is always reached."""

    def went_away(self, exc: Exception) -> None:
        """Another process (a Dask worker) found the store away for the whole patience: a
        local disk has no such state."""


LocalStore = Store

_LOCAL = Store()
_COPIES: dict[Path, Store] = {}
"""The local copy of each object store opened in this process, by its root."""


def register_copy(root: Path, store: Store) -> None:
    """Make `store` the owner of every path under `root` (its local copy)."""
    _COPIES[root] = store


def store_of(path: Path) -> Store:
    """The store that owns `path`: an object store if it lies in one's local copy, else the
    local filesystem."""
    if _COPIES:
        for root, store in _COPIES.items():
            if path.is_relative_to(root):
                return store
    return _LOCAL


def hidden_key(key: str) -> bool:
    """A key with a part starting with a dot: locks, staging folders, temp files. Such
    objects are not files of the copy, and such local files are not put into the store."""
    return any(part.startswith(".") for part in key.split("/"))


def wanted_key(relative: str, pattern: str) -> bool:
    """Whether a key below a folder is part of the copy: matching `pattern` (`*` crosses
    folders) and not hidden."""
    return fnmatch.fnmatchcase(relative, pattern) and not hidden_key(relative)


@contextlib.contextmanager
def temp_beside(path: Path) -> Iterator[Path]:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
    finally:
        tmp.unlink(missing_ok=True)
