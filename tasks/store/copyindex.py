"""The local copy's index of an object-store work dir: each local file's entity tag, size
and modification time (SQLite), so a refresh downloads only what changed."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path


class CopyIndex:
    """Which entity tag each file of the local copy holds, and its size and mtime when
    written (a file changed locally since is downloaded again). Shared by the processes
    using one scratch dir; losing it costs downloads, never correctness."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=30, check_same_thread=False)
        self._lock = threading.Lock()
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=OFF")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS files "
                "(key TEXT PRIMARY KEY, etag TEXT, size INTEGER, mtime_ns INTEGER)"
            )

    def under(self, prefix: str) -> dict[str, tuple[str, int, int]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT key, etag, size, mtime_ns FROM files WHERE key >= ? AND key < ?",
                (prefix, prefix + "\uffff"),
            ).fetchall()
        return {key: (etag, size, mtime) for key, etag, size, mtime in rows}

    def put(self, entries: Iterable[tuple[str, str, Path]]) -> None:
        rows = []
        for key, etag, path in entries:
            with contextlib.suppress(FileNotFoundError):
                stat = path.stat()
                rows.append((key, etag, stat.st_size, stat.st_mtime_ns))
        if rows:
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?)", rows)

    def drop(self, keys: Iterable[str]) -> None:
        with self._lock, self._db:
            self._db.executemany("DELETE FROM files WHERE key = ?", [(k,) for k in keys])


def is_current(path: Path, known: tuple[str, int, int] | None, etag: str) -> bool:
    if known is None or known[0] != etag:
        return False
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    return (stat.st_size, stat.st_mtime_ns) == (known[1], known[2])
