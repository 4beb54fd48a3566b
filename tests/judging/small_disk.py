"""A small file system for the tests of a full disk: a tmpfs mounted for the test where it
may mount one (root), else a space budget on the writes the judge stage makes (journal
lines, the journal's reserve, parquet files), which refuses a write past it with ENOSPC as
a full file system does."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

import tasks.judging.journal as journal
import tasks.storage as storage


class SmallDisk:
    """A folder `root` on a small file system; `leave(n)` fills it up to `n` bytes free,
    `free()` gives the space back."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def leave(self, free: int) -> None:
        raise NotImplementedError

    def free(self) -> None:
        raise NotImplementedError


class Tmpfs(SmallDisk):
    def leave(self, free: int) -> None:
        stat = os.statvfs(self.root)
        with open(self.root / "ballast", "wb") as f:
            f.write(b"\0" * max(0, stat.f_bavail * stat.f_frsize - free))

    def free(self) -> None:
        (self.root / "ballast").unlink(missing_ok=True)


class Budget(SmallDisk):
    """The bytes left; the judge stage's writers go through `write` and `allocate`."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__(root)
        self.left = 1 << 40
        real_os, real_release = journal.os, journal.Reserve.release
        sizes: dict[int, int] = {}

        def write(fd: int, data: Any) -> int:
            if self.left <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            n = real_os.write(fd, bytes(data)[: self.left])
            self.left -= n
            return n

        def posix_fallocate(fd: int, offset: int, size: int) -> None:
            if size > self.left:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.left -= size
            sizes[fd] = size

        def release(reserve: journal.Reserve) -> None:
            self.left += sizes.pop(reserve.fd, 0)
            real_release(reserve)

        def write_table(table: Any, where: Any, **kw: Any) -> None:
            buffer = io.BytesIO()
            pq.write_table(table, buffer, **kw)
            if buffer.tell() > self.left:
                raise OSError(errno.ENOSPC, "Error writing bytes to file: No space left")
            self.left -= buffer.tell()
            pq.write_table(table, where, **kw)

        fake_os = SimpleNamespace(
            **{k: getattr(real_os, k) for k in dir(real_os) if not k.startswith("__")}
        )
        fake_os.write, fake_os.posix_fallocate = write, posix_fallocate
        monkeypatch.setattr(journal, "os", fake_os)
        monkeypatch.setattr(journal.Reserve, "release", release)
        fake_pq = SimpleNamespace(**{k: getattr(pq, k) for k in dir(pq) if not k.startswith("__")})
        fake_pq.write_table = write_table
        monkeypatch.setattr(storage, "pq", fake_pq)

    def leave(self, free: int) -> None:
        self.left = free

    def free(self) -> None:
        self.left = 1 << 40


def _mount(folder: Path, size_mb: int) -> bool:
    if os.environ.get("JUDGELINE_TEST_DISK") == "budget":
        return False
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(folder)],
        capture_output=True,
    )
    return mounted.returncode == 0


@contextmanager
def small_disk(monkeypatch: pytest.MonkeyPatch, size_mb: int = 8) -> Iterator[SmallDisk]:
    """A tmpfs of `size_mb` where this process may mount one, else (or with
    JUDGELINE_TEST_DISK=budget) a `Budget`."""
    folder = Path(tempfile.mkdtemp(prefix="judgeline-disk-"))
    if not _mount(folder, size_mb):
        try:
            yield Budget(folder, monkeypatch)
        finally:
            subprocess.run(["rm", "-rf", str(folder)], check=False)
        return
    try:
        yield Tmpfs(folder)
    finally:
        # Fails if a process still holds a file there (the volume could not be unmounted).
        subprocess.run(["umount", str(folder)], check=True)
        folder.rmdir()


@contextmanager
def tmpfs(size_mb: int = 16) -> Iterator[Tmpfs]:
    """A tmpfs of `size_mb`, for a test whose writers run in other processes (a budget on
    this process's writes cannot reach them); skips where this process may not mount one."""
    folder = Path(tempfile.mkdtemp(prefix="judgeline-disk-"))
    if not _mount(folder, size_mb):
        folder.rmdir()
        pytest.skip("needs a tmpfs: the right to mount one (root)")
    try:
        yield Tmpfs(folder)
    finally:
        subprocess.run(["umount", str(folder)], check=True)
        folder.rmdir()
