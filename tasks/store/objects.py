"""A work dir on an object store (S3, GCS, Azure Blob, MinIO, R2) through obstore, read
through a local copy.

The store holds the work dir's files under its URL, in the local layout
(`s3://bucket/prefix/cache/replies/<uuid>.parquet`, ...). Each process reads them as local
files in a copy under its scratch dir (`tasks.store.scratch`), which `refresh` brings up to
date one folder at a time: it lists the folder in the store and downloads only objects whose
entity tag differs from the copy's (an index in SQLite remembers each local file's tag), so
a rerun downloads nothing it already has. A folder is listed at most once per `FRESH_S` in a
process unless the caller needs the newest listing (`force`).

Writes keep the local guarantees with the store's own atomicity: an object appears whole or
not at all (a single PUT), a write-once file is a conditional create (`If-None-Match: *`)
that fails if the object exists, so two writers never clobber each other, and a folder
(manifest, plan) is complete once its sidecar, put last, exists. Every write goes to the
store first, then into the local copy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import obstore
from obstore.exceptions import AlreadyExistsError, BaseError, PreconditionError

from tasks.errors import StoreError, StoreUnreachable
from tasks.store.access import explain
from tasks.store.copyindex import CopyIndex, is_current
from tasks.store.files import MADE, Store, hidden_key, register_copy, temp_beside, wanted_key
from tasks.store.patience import (
    FIRST_PATIENCE_S,
    PATIENCE_ENV,
    UNANSWERED,
    retry_config,
    retry_pause_cap,
    store_patience,
)

__all__ = ["FRESH_S", "PATIENCE_ENV", "ObjectStore", "StoreObject", "store_patience"]

FRESH_S = 1.0
"""A folder listed less than this long ago in this process is not listed again, unless the
caller asks for the newest listing: what others wrote in the last second may be unseen, as
if the read had happened a second earlier."""

DOWNLOAD_THREADS = 8

T = TypeVar("T")


class StoreObject:
    """One object's bytes and entity tag (the version a conditional write names)."""

    def __init__(self, data: bytes, etag: str | None) -> None:
        self.data = data
        self.etag = etag


class ObjectStore(Store):
    """The files of a work dir at `url`, read through a local copy at `root`."""

    remote: ClassVar[bool] = True

    def __init__(self, url: str, state: Path) -> None:
        from obstore.store import from_url

        self.url = url.rstrip("/")
        self.state = state
        """This machine's folder for the store: the copy and its index."""
        self.root = state / "work"
        self.root.mkdir(parents=True, exist_ok=True)
        self.patience_s = store_patience()
        self.answered = False
        """Whether the store answered a request of this process: until it has, a request is
        retried for `FIRST_PATIENCE_S` only (a wrong address, not an outage)."""
        self.down: StoreUnreachable | None = None
        """The request that went unanswered for the whole patience, until one is answered:
        meanwhile requests are tried once, not waited for again."""
        try:  # no request yet: a URL or configuration the client refuses
            self._patient = from_url(self.url, retry_config=retry_config(self.patience_s))
            first = min(FIRST_PATIENCE_S, self.patience_s)
            self._first = from_url(self.url, retry_config=retry_config(first))
            self._hasty = from_url(self.url, retry_config=retry_config(1.0))
        except (BaseError, ValueError) as exc:
            raise self.failed("open", exc) from exc
        self._index = CopyIndex(state / "copy-index.sqlite")
        self._listed: dict[tuple[str, str], float] = {}
        self._listing_lock = threading.Lock()
        register_copy(self.root, self)

    def __repr__(self) -> str:
        return f"ObjectStore({self.url!r}, copy at {self.root})"

    @property
    def objects(self) -> Any:
        """The store client for the next request: retried for `patience_s` once the store
        has answered, else briefly (`FIRST_PATIENCE_S`), and hardly while it is `down`."""
        if self.down is not None:
            return self._hasty
        return self._patient if self.answered else self._first

    def ask(self, what: str, request: Callable[[], T]) -> T:
        """`request()` to the store, retried until it is answered or the patience has passed.

        obstore does not retry a write whose answer was lost (the link reset after it went
        out); here it is, and if its first try landed it meets its own object, which claims
        and leases read back. Refusals become a StoreError naming the store, the request and
        the reason; absent objects and failed conditions pass through. A request left
        unanswered for the whole patience is a `StoreUnreachable`, and the store is `down`
        until a request is answered."""
        started, pause = time.monotonic(), 0.1
        while True:
            try:
                result = request()
            except (FileNotFoundError, AlreadyExistsError, PreconditionError):
                self.down, self.answered = None, True
                raise
            except (BaseError, OSError, ValueError) as exc:
                error = self.failed(what, exc)
                if not isinstance(error, StoreUnreachable):
                    raise error from exc
                if time.monotonic() - started + pause < self._window():
                    time.sleep(pause)
                    pause = min(2 * pause, retry_pause_cap(self.patience_s))
                    continue
                if self.answered:
                    self.down = self.down or error
                raise error from exc
            self.down, self.answered = None, True
            return result

    def reached_by_the_flow(self) -> None:
        """This process (a Dask worker) works for a flow that reached the store: a request
        it leaves unanswered is an outage, waited out for the whole patience, not a wrong
        address (a worker started meanwhile would give up after `FIRST_PATIENCE_S`)."""
        self.answered = True

    def went_away(self, exc: Exception) -> None:
        """Another process (a Dask worker) found the store away for the whole patience:
        this one counts it down too (its requests tried once until one is answered), rather
        than wait out the patience again for its last writes."""
        if isinstance(exc, StoreUnreachable) and self.down is None:
            self.down = exc

    def _window(self) -> float:
        """How long an unanswered request is retried: the patience once the store has
        answered, briefly before, and not at all while it is `down`."""
        if self.down is not None:
            return 0.0
        return self.patience_s if self.answered else min(FIRST_PATIENCE_S, self.patience_s)

    def failed(self, what: str, exc: BaseException) -> StoreError:
        """A failed request as a StoreError: the store, the request, its reason (the store's
        own words, cut short) and what to do about it when the reason says (`explain`)."""
        reason = " ".join(str(exc).split("\n\nDebug source:")[0].split())
        if isinstance(exc, BaseError) and UNANSWERED.search(reason):
            # The client's last words (`... - HTTP error: error sending request`), not the
            # whole request line.
            last = reason.rsplit(" - ", 1)[-1][:200]
            if not self.answered:
                return StoreUnreachable(
                    f"object store {self.url} did not answer ({what}: {last}); check its "
                    "address (AWS_ENDPOINT_URL for an S3-compatible store) and the network"
                )
            waited = "is still away" if self.down else f"did not answer for {self.patience_s:g} s"
            return StoreUnreachable(f"object store {self.url} {waited} ({what}: {last})")
        hint = explain(reason)
        said = f"object store {self.url}: {what} failed: {type(exc).__name__}: {reason[:400]}"
        return StoreError(f"{said}. {hint[0].upper()}{hint[1:]}" if hint else said)

    # --- keys -------------------------------------------------------------------------------

    def key(self, path: Path) -> str:
        """The object key of a local path in the copy."""
        return path.relative_to(self.root).as_posix()

    def made(self, role: str, *args: Any, **kwargs: Any) -> Any:
        return MADE[role][1](*args, **kwargs)

    def lock_key(self, path: Path) -> str:
        return self.location(path)

    def location(self, path: Path) -> str:
        return f"{self.url}/{self.key(path)}"

    # --- plain object operations (claims, leases and journals use these) -------------------

    def create(self, key: str, data: bytes) -> str | None:
        """Put `data` at `key` unless an object is there: its entity tag, or None if one was."""
        try:
            put = self.ask(
                f"creating {key}",
                lambda: obstore.put(self.objects, key, data, mode="create", use_multipart=False),
            )
            return put["e_tag"] or ""
        except AlreadyExistsError:
            return None

    def replace(self, key: str, data: bytes, *, etag: str | None = None) -> str | None:
        """Put `data` at `key`; with `etag`, only if the object still has that tag (None if
        it changed or vanished meanwhile)."""
        mode: Any = "overwrite" if etag is None else {"e_tag": etag}
        try:
            put = self.ask(
                f"writing {key}",
                lambda: obstore.put(self.objects, key, data, mode=mode, use_multipart=False),
            )
            return put["e_tag"] or ""
        except (PreconditionError, FileNotFoundError):
            return None

    def read(self, key: str) -> StoreObject | None:
        """The object at `key`, or None if there is none."""
        try:
            return self.ask(f"reading {key}", lambda: self._get(key))
        except FileNotFoundError:
            return None

    def _get(self, key: str) -> StoreObject:
        result = obstore.get(self.objects, key)
        return StoreObject(bytes(result.bytes()), result.meta.get("e_tag"))

    def delete(self, keys: str | list[str]) -> None:
        """Delete objects (absent ones are no error); many in few requests."""
        if keys:
            with contextlib.suppress(FileNotFoundError):
                self.ask("deleting objects", lambda: obstore.delete(self.objects, keys))

    def list_objects(self, prefix: str) -> list[dict[str, Any]]:
        """Every object under `prefix` (a folder key ending in '/'), with path, size, e_tag."""
        return self.ask(
            f"listing {prefix}",
            lambda: [dict(m) for chunk in obstore.list(self.objects, prefix) for m in chunk],
        )

    # --- files ------------------------------------------------------------------------------

    def publish(self, tmp: Path, path: Path, *, overwrite: bool) -> bool:
        key = self.key(path)
        if hidden_key(key):
            return super().publish(tmp, path, overwrite=overwrite)  # staging: this machine's
        mode: Any = "overwrite" if overwrite else "create"
        multipart = None if overwrite else False

        def put() -> Any:
            # A single PUT up to 5 GB, else (overwriting) a multipart upload: either way the
            # object appears whole when the upload completes.
            with tmp.open("rb") as handle:
                return obstore.put(self.objects, key, handle, mode=mode, use_multipart=multipart)

        try:
            try:
                etag = self.ask(f"writing {key}", put)["e_tag"]
            except AlreadyExistsError:
                # Another writer's, or ours: a retried put whose first try landed but whose
                # answer was lost. Either way the copy gets the store's.
                fetched = self._fetch({"path": key})
                self._index.put([fetched] if fetched is not None else [])
                return False
            os.replace(tmp, path)
            self._index.put([(key, etag or "", path)])
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def folder_stands(self, final: Path, *, complete_with: str) -> bool:
        """A folder in the store stands once its last file is there: without it, its writer
        died between its puts, and the next writer completes it."""
        return (final / complete_with).is_file()

    def publish_folder(self, staging: Path, final: Path, *, complete_with: str) -> bool:
        names = sorted(
            (p.name for p in staging.iterdir() if p.is_file()),
            key=lambda n: (n == complete_with, n),
        )
        tags: dict[str, str] = {}
        existed = False
        for name in names:
            etag = self.create(self.key(final / name), (staging / name).read_bytes())
            if etag is None:
                existed = True
            else:
                tags[name] = etag
        if existed:
            # Another writer published it (or began to: its missing files are ours now).
            self.refresh(final, force=True)
            return False
        if final.exists():
            shutil.rmtree(final)  # a partial copy of an unfinished folder
        os.rename(staging, final)
        self._index.put((self.key(final / n), tags[n], final / n) for n in names)
        return True

    def remove(self, path: Path) -> None:
        key = self.key(path)
        self.delete(key)
        path.unlink(missing_ok=True)
        self._index.drop([key])

    def move(self, path: Path, target: Path) -> bool:
        source, key = self.key(path), self.key(target)
        try:
            self.ask(f"copying {source} to {key}", lambda: obstore.copy(self.objects, source, key))
        except FileNotFoundError:
            return False
        self.delete(source)
        self._index.drop([source])
        if path.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), target)
        return True

    def refresh(self, folder: Path, pattern: str = "*", *, force: bool = False) -> None:
        prefix = self.key(folder) + "/"
        memo = (prefix, pattern)
        now = time.monotonic()
        if not force and self._listed_lately(prefix, pattern, now):
            return
        with self._listing_lock:
            listed = {
                meta["path"]: meta
                for meta in self.list_objects(prefix)
                if wanted_key(meta["path"][len(prefix) :], pattern)
            }
            known = self._index.under(prefix)
            stale = [
                meta
                for key, meta in listed.items()
                if not is_current(self.root / key, known.get(key), meta.get("e_tag") or "")
            ]
            self._download(stale)
            gone = [k for k in known if k not in listed and wanted_key(k[len(prefix) :], pattern)]
            for key in gone:
                (self.root / key).unlink(missing_ok=True)
            self._index.drop(gone)
            self._listed[memo] = now

    def _listed_lately(self, prefix: str, pattern: str, now: float) -> bool:
        """Whether this folder, or a folder above it with everything in it, was listed in
        the last `FRESH_S` (a warehouse lists `runs/` once, not each run again)."""
        if now - self._listed.get((prefix, pattern), -FRESH_S) < FRESH_S:
            return True
        parts = prefix.rstrip("/").split("/")
        for cut in range(len(parts), 0, -1):
            above = "/".join(parts[:cut]) + "/"
            if now - self._listed.get((above, "*"), -FRESH_S) < FRESH_S:
                return True
        return False

    def _download(self, metas: list[dict[str, Any]]) -> None:
        """Fetch objects into the copy, each written to a temp name and renamed; JSON
        sidecars last, as writers put them last."""
        if not metas:
            return
        data_files = [m for m in metas if not m["path"].endswith(".json")]
        sidecars = [m for m in metas if m["path"].endswith(".json")]
        with ThreadPoolExecutor(DOWNLOAD_THREADS) as pool:
            for group in (data_files, sidecars):
                fetched = [f for f in pool.map(self._fetch, group) if f is not None]
                self._index.put(fetched)

    def _fetch(self, meta: dict[str, Any]) -> tuple[str, str, Path] | None:
        key = meta["path"]
        found = self.read(key)
        if found is None:
            return None  # deleted since the listing
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        with temp_beside(path) as tmp:
            tmp.write_bytes(found.data)
            modified = meta.get("last_modified")
            if modified is not None:  # the copy keeps the store's order of writes
                os.utime(tmp, (modified.timestamp(), modified.timestamp()))
            os.replace(tmp, path)
        return key, found.etag or meta.get("e_tag") or "", path

    def check_access(self) -> None:
        """Write, read and delete a probe object: raises the store's error if any fails."""
        key = f".judgeline-write-check/{os.getpid()}-{time.time_ns()}"
        what = "writing, reading and deleting a probe object"
        try:
            self.ask(what, lambda: obstore.put(self.objects, key, b"", use_multipart=False))
            self.ask(what, lambda: obstore.get(self.objects, key).bytes())
            self.ask(what, lambda: obstore.delete(self.objects, key))
        except FileNotFoundError as exc:  # not the object just put: its bucket
            raise self.failed(what, exc) from exc
