"""Leases on an object store: which processes are alive, and lock objects that die with them.

A store has no locks that vanish with their holder (a local disk's `flock`). Instead each
process that writes to a store holds a lease, `leases/<writer>.json`, which a thread of its
own renews every third of its time to live (`JUDGELINE_LEASE_SECONDS`, 30 s by default); a
process that dies stops renewing it, and once its time is up its writer counts as dead. A
lock is an object created with a conditional write (`If-None-Match: *`, so of two processes
creating it at once exactly one succeeds) that names its writer; a lock whose writer is dead
is taken over with a conditional replace (`If-Match` on the entity tag that was read), so of
two processes taking it over exactly one succeeds.

Whether a lease is alive is judged by wall clocks (the renewer's stamp against the reader's
clock): the machines' clocks must agree to within a small part of the time to live (NTP
does). A process paused for longer than that (a frozen VM) loses its locks to others.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from tasks.errors import StoreUnreachable
from tasks.store.objects import ObjectStore

__all__ = ["LEASE_ENV", "LeaseLock", "WriterLease", "json_object", "lease_ttl", "writer_lease"]

log = logging.getLogger(__name__)

LEASE_ENV = "JUDGELINE_LEASE_SECONDS"
DEFAULT_TTL_S = 30.0
ALIVE_MEMO_S = 1.0
"""How long a look at another writer's lease is trusted before it is read again."""


def lease_ttl() -> float:
    """A lease's time to live in seconds ($JUDGELINE_LEASE_SECONDS, else 30; at least 1)."""
    try:
        return max(1.0, float(os.environ.get(LEASE_ENV, DEFAULT_TTL_S)))
    except ValueError:
        return DEFAULT_TTL_S


class WriterLease:
    """This process's lease on one store, renewed while anything holds it."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.ttl_s = lease_ttl()
        self.started_at = time.time()
        self._holders = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen: dict[str, tuple[float, bool]] = {}

    @property
    def key(self) -> str:
        return f"leases/{self.id}.json"

    def describe(self) -> dict[str, Any]:
        """Who holds it, as a lock object names its holder (and where its machine keeps its
        journal: the scratch dir)."""
        return {
            "writer": self.id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started_at)),
            "scratch": str(self.store.state),
        }

    def _write(self) -> None:
        body = {**self.describe(), "renewed_at": time.time(), "ttl_s": self.ttl_s}
        self.store.replace(self.key, json.dumps(body).encode("utf-8"))

    def hold(self) -> None:
        """Count one more holder; the first writes the lease and starts renewing it."""
        with self._lock:
            self._holders += 1
            if self._holders > 1:
                return
            self._write()
            self._stop.clear()
            self._thread = threading.Thread(target=self._renew, name="judgeline-lease", daemon=True)
            self._thread.start()

    def let_go(self) -> None:
        """Count one holder less; the last stops renewing and deletes the lease."""
        with self._lock:
            self._holders -= 1
            if self._holders > 0:
                return
            self._stop.set()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=10)
        try:
            self.store.delete(self.key)
        except StoreUnreachable as exc:  # it runs out by itself
            log.info("lease %s left on %s: %s", self.key, self.store.url, exc)

    def _renew(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self._write()
            except Exception as exc:  # noqa: BLE001 - retried at the next period
                # A store that does not answer stops a judge stage, which says so once.
                say = log.info if isinstance(exc, StoreUnreachable) else log.warning
                say("could not renew lease %s on %s: %s", self.key, self.store.url, exc)

    def alive(self, writer: str) -> bool:
        """Whether `writer`'s lease is current (this process's own always is)."""
        if writer == self.id:
            return True
        now = time.monotonic()
        seen = self._seen.get(writer)
        if seen is not None and now - seen[0] < ALIVE_MEMO_S:
            return seen[1]
        body = self.holder(writer)
        alive = False
        if body is not None:
            try:
                alive = float(body["renewed_at"]) + float(body["ttl_s"]) > time.time()
            except (ValueError, KeyError, TypeError):
                alive = False
        self._seen[writer] = (now, alive)
        return alive

    def holder(self, writer: str) -> dict[str, Any] | None:
        """What `writer`'s lease says of it (`describe`, renewed_at, ttl_s); None if it has
        none (it let go, or never wrote one)."""
        found = self.store.read(f"leases/{writer}.json")
        return None if found is None else json_object(found.data)


_LEASES: dict[tuple[int, int], WriterLease] = {}


def writer_lease(store: ObjectStore) -> WriterLease:
    """This process's lease on `store` (a forked child gets a lease of its own)."""
    slot = (id(store), os.getpid())
    lease = _LEASES.get(slot)
    if lease is None:
        lease = _LEASES[slot] = WriterLease(store)
    return lease


@dataclass
class LeaseLock:
    """A lock object at `key` held by this process's lease; `take` returns None once held,
    else what the live holder wrote (its writer, host, pid and start)."""

    store: ObjectStore
    key: str

    def __post_init__(self) -> None:
        self.lease = writer_lease(self.store)
        self.held = False

    def take(self, **extra: Any) -> dict[str, Any] | None:
        self.lease.hold()
        body = json.dumps({**self.lease.describe(), **extra}).encode("utf-8")
        holder: dict[str, Any] = {}
        for _ in range(5):
            if self.store.create(self.key, body) is not None:
                self.held = True
                return None
            found = self.store.read(self.key)
            if found is None:
                continue  # let go meanwhile: create again
            holder = json_object(found.data)
            writer = str(holder.get("writer", ""))
            if writer == self.lease.id:
                self.held = True
                return None
            if self.lease.alive(writer):
                break
            if self.store.replace(self.key, body, etag=found.etag) is not None:
                self.held = True
                return None
        self.lease.let_go()
        return holder

    def release(self) -> None:
        if self.held:
            self.held = False
            try:
                self.store.delete(self.key)
            except StoreUnreachable as exc:  # taken over once the lease runs out
                log.info("lock %s left on %s: %s", self.key, self.store.url, exc)
            self.lease.let_go()

    def is_free(self) -> bool:
        """Whether nobody alive holds it (no object, or its writer's lease ran out)."""
        found = self.store.read(self.key)
        if found is None:
            return True
        return not self.lease.alive(str(json_object(found.data).get("writer", "")))


def json_object(data: bytes) -> dict[str, Any]:
    """The JSON object an object of the store holds, or {} (not JSON, or not an object)."""
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
