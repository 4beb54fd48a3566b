"""Where a replay reads its outcomes and writes its tables: local paths or object store URLs.

A store URL is read through a local copy under the scratch dir (`tasks.store`): a run's
`runs/<run>/outcomes.parquet` through its work dir's copy of the run folder (so that its
judges' prices are found beside it, as for a local run), any other file through a copy of
its folder. An `--out` URL is a folder of the store: the tables are written into its copy
and each is put into the store as it is published (`tasks.storage`).
"""

from __future__ import annotations

from pathlib import Path

from tasks.errors import InputError
from tasks.store import is_store_url, store_of
from tasks.store.workdir import WorkDir

__all__ = ["Output", "input_file"]


def input_file(place: str) -> Path:
    """The local file a replay reads for `place` (a path, or a store URL read through its
    copy); an InputError naming `place` as given if there is no such file."""
    if not is_store_url(place):
        path = Path(place)
        if not path.is_file():
            raise InputError("no such outcomes file", file=place)
        return path
    folder, _, name = place.rstrip("/").rpartition("/")
    base, runs, run_id = folder.rpartition("/runs/")
    if runs and is_store_url(base) and "/" not in run_id:
        work = WorkDir.at(base)
        path = work.fresh("runs", run_id) / name
    else:
        from tasks.store.objects import ObjectStore  # a store's client: for a URL only

        work = WorkDir.at(folder)
        found = work.store.read(name) if isinstance(work.store, ObjectStore) else None
        path = work.root / name
        if found is not None:
            path.write_bytes(found.data)
        else:
            path.unlink(missing_ok=True)
    if not path.is_file():
        raise InputError("no such outcomes file in the object store", file=place)
    return path


class Output:
    """The folder a replay writes into: a local folder, or a store URL's copy (its files are
    put into the store as they are published)."""

    def __init__(self, place: str) -> None:
        self.folder = WorkDir.at(place).root if is_store_url(place) else Path(place)

    def location(self, path: Path) -> str:
        """A written table as a person should be told: its path, or its URL in a store
        (also for a folder given as a path into a store's copy, as a run's own replay is)."""
        return store_of(path.absolute()).location(path.absolute())
