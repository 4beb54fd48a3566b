"""Where a work dir's files live: a local folder, or an object store read through a local copy.

`tasks.store.files.Store` is the seam: every write of a work dir file is a publish through
the store that owns its path, every read of a folder another process may have written is
preceded by a `refresh` of it. The local store does what a filesystem does; the object store
(`tasks.store.objects`) puts files with conditional writes and keeps a read-through copy in
the scratch dir. Claims and locks on an object store are leases (`tasks.store.leases`).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from tasks.store.files import LocalStore, Store, provide, store_of
from tasks.store.usercache import user_cache_dir

__all__ = [
    "SCRATCH_ENV",
    "LocalStore",
    "Store",
    "is_store_url",
    "open_object_store",
    "provide",
    "scratch_dir",
    "store_of",
]

SCRATCH_ENV = "JUDGELINE_SCRATCH_DIR"
"""This machine's scratch dir: the local copy of what it read from an object store."""

_URL = re.compile(r"^(s3|s3a|gs|az|azure|abfs|abfss|adl)://[^/]+", re.IGNORECASE)
_OPEN: dict[tuple[str, Path], Store] = {}


def is_store_url(text: str | os.PathLike[str]) -> bool:
    """Whether a work dir names an object store (s3://, gs://, az:// and Azure's aliases)."""
    return isinstance(text, str) and _URL.match(text) is not None


def scratch_dir(chosen: str | os.PathLike[str] | None = None) -> Path:
    """The scratch dir: `chosen`, else $JUDGELINE_SCRATCH_DIR, else the user's cache dir
    ($XDG_CACHE_HOME or ~/.cache) / judgeline."""
    picked = chosen or os.environ.get(SCRATCH_ENV)
    if picked:
        return Path(picked).expanduser().resolve()
    return user_cache_dir().resolve()


def _slug(url: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", url.split("://", 1)[1]).strip("-")[:60]
    return f"{readable}-{hashlib.sha256(url.encode('utf-8')).hexdigest()[:10]}"


def open_object_store(url: str, scratch: str | os.PathLike[str] | None = None) -> Store:
    """The object store at `url` with its local copy under the scratch dir (one per process,
    URL and scratch dir: its listing memo and leases are shared by every WorkDir on it).
    A URL the store client would not keep exactly, or an environment that cannot reach the
    store, is refused before any request (`tasks.store.access`)."""
    from tasks.store.access import check_configuration, check_url
    from tasks.store.objects import ObjectStore

    url = url.rstrip("/")
    check_url(url)
    state = scratch_dir(scratch) / _slug(url)
    found = _OPEN.get((url, state))
    if found is None:
        check_configuration(url)
        found = _OPEN[(url, state)] = ObjectStore(url, state)
    return found
