"""Call claims on an object store: one object per call, created with a conditional write.

Before a call's first attempt its sender creates `cache/claims/<call_key>` with
`If-None-Match: *`, naming its writer (`tasks.store.leases`): of two processes creating it at
once exactly one succeeds. Once the call's reply is published as parquet the claim becomes a
marker, `stored`, naming the reply file; a call that failed for good has its claim deleted,
so it may be sent again. A process finding the claim:

- `stored`: the reply is stored. It reads the newest reply files and skips the call (if the
  reply is not there, its file was set aside as corrupt: the call is claimed again and sent);
- held by a live writer: the call is being sent; ask again later;
- held by a writer whose lease ran out (it died), or by this process's writer under a
  claimant since closed (a Dask worker's earlier batch, stopped while the store was away):
  first publish what that writer journaled (`tasks.judging.store_journal`), read the newest
  reply files, and skip the call if its reply is among them; else take the claim over with
  `If-Match` on the tag just read (of two processes taking it over exactly one succeeds) and
  send it. A dead writer of another machine may keep replies in that machine's journal (a
  run stopped by an outage does): before the first of its calls is sent again, one warning
  names it and the command that would publish them there.

Markers stay: they make the stored-or-not question exact without listing the store again,
so a call stored by another process while this one was looking elsewhere is never paid for
twice. Only the calls in flight when a process died, and replies it received in its last
journal put, are sent again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tasks.errors import StoreError, StoreUnreachable
from tasks.judging.cache import fold_dead_journals
from tasks.judging.claims import Claim, StoredKeyView
from tasks.store.leases import json_object, writer_lease
from tasks.store.objects import ObjectStore
from tasks.store.workdir import WorkDir

__all__ = ["CLAIM_PREFIX", "StoreCallClaims"]

log = logging.getLogger(__name__)

CLAIM_PREFIX = "cache/claims/"
MARKER_THREADS = 8


_LIVE_CLAIMANTS: set[str] = set()
"""The claimants of this process not closed: a claim naming this process's lease and
another claimant is stale (a Dask worker's earlier batch that could not settle it)."""


class StoreCallClaims:
    """This process's claims on the calls of a work dir on an object store, for `run_id`
    (named in each claim, for the message of a run resumed elsewhere)."""

    def __init__(
        self, work: WorkDir, view: StoredKeyView | None = None, *, run_id: str = ""
    ) -> None:
        assert isinstance(work.store, ObjectStore)
        self.work = work
        self.store = work.store
        self.lease = writer_lease(self.store)
        self.lease.hold()
        try:
            self.view = view if view is not None else StoredKeyView(work)
        except BaseException:
            self.lease.let_go()  # a long-lived process (a Dask worker) renews no lease for it
            raise
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._markers = ThreadPoolExecutor(MARKER_THREADS, thread_name_prefix="judgeline-claim")
        self._closed = False
        self.claimant = uuid.uuid4().hex[:12]
        """This object's own name in its claims: two in one process do not share calls."""
        _LIVE_CLAIMANTS.add(self.claimant)
        self.run_id = run_id
        self.waited: set[str] = set()
        """Call keys found claimed by another live process at least once."""
        self.taken_over: dict[str, int] = {}
        """Calls taken over from writers that died without publishing them, by writer."""

    def _body(self, state: str, **extra: Any) -> bytes:
        body = {"writer": self.lease.id, "claimant": self.claimant, "state": state,
                "run_id": self.run_id, **extra}  # fmt: skip
        return json.dumps(body).encode("utf-8")

    def _alive(self, writer: str, claimant: object) -> bool:
        """Whether the claim's holder lives: its writer's lease is current, and if that is
        this process's, its claimant is not closed."""
        if writer == self.lease.id:
            return claimant in _LIVE_CLAIMANTS
        return self.lease.alive(writer)

    def _stored(self, call_key: str) -> bool:
        with self._lock:
            if call_key in self.view:
                return True
            self.view.refresh(newest=True)
            return call_key in self.view

    async def claim(self, call_key: str) -> Claim:
        """`take` in a thread: a claim is a request to the store."""
        if call_key in self._held:
            return Claim.MINE
        return await asyncio.to_thread(self.take, call_key)

    def _mine(self, call_key: str) -> Claim:
        with self._lock:
            self._held.add(call_key)
        return Claim.MINE

    def take(self, call_key: str) -> Claim:
        """Claim a call before its first attempt: MINE (send it), STORED or BUSY."""
        if call_key in self._held:
            return Claim.MINE
        key = CLAIM_PREFIX + call_key
        sending = self._body("sending")
        for _ in range(5):
            if self.store.create(key, sending) is not None:
                self._mine(call_key)
                with self._lock:
                    known = call_key in self.view
                if known:  # stored without a claim (an import, a provider batch)
                    self._settle(call_key, stored=True, file=None)
                    return Claim.STORED
                return Claim.MINE
            found = self.store.read(key)
            if found is None:
                continue  # released meanwhile: create it again
            claim = json_object(found.data)
            writer = str(claim.get("writer", ""))
            if claim.get("state") == "stored":
                if self._stored(call_key):
                    return Claim.STORED
            elif claim.get("claimant") == self.claimant:
                return self._mine(call_key)
            elif self._alive(writer, claim.get("claimant")):
                self.waited.add(call_key)
                return Claim.BUSY
            else:
                fold_dead_journals(self.work)
                if self._stored(call_key):
                    self.store.replace(key, self._body("stored", file=None), etag=found.etag)
                    return Claim.STORED
                self._taking_over(writer, claim)
            # A stored marker whose reply is gone, or a dead writer's call: take it over.
            if self.store.replace(key, sending, etag=found.etag) is not None:
                return self._mine(call_key)
        self.waited.add(call_key)
        return Claim.BUSY

    def _taking_over(self, writer: str, claim: dict[str, Any]) -> None:
        """A dead writer's call with no stored reply is about to be sent again. Its replies
        received while the store was away wait in its own machine's journal (published by
        the next run there); if that is not this machine's, say so once per writer, before
        the first of its calls is sent again."""
        self.taken_over[writer] = self.taken_over.get(writer, 0) + 1
        if self.taken_over[writer] > 1 or writer == self.lease.id:
            return
        holder = self.lease.holder(writer) or {}
        here = self.lease.describe()
        if (holder.get("host"), holder.get("scratch")) == (here["host"], here["scratch"]):
            return  # its journal on this machine was published just now
        host = holder.get("host") or "another machine"
        where = f" (scratch dir {holder['scratch']})" if holder.get("scratch") else ""
        run = claim.get("run_id") or "RUN"
        log.warning(
            "calls claimed by %s on %s%s, which stopped without publishing them, are sent "
            "again here and may be paid twice (at most the calls it had in flight): replies it "
            "received while the store was away wait in that machine's journal; to publish "
            "them instead, run `judgeline --work-dir %s rerun-failed %s` on %s first",
            writer, host, where, self.store.url, run, host,
        )  # fmt: skip

    def _settle(self, call_key: str, *, stored: bool, file: str | None) -> None:
        """Turn a held claim into a `stored` marker, or delete it (the call may be sent
        again), in a thread of its own."""
        with self._lock:
            if call_key not in self._held:
                return
            self._held.discard(call_key)
        body = self._body("stored", file=file) if stored else None
        self._markers.submit(self._write_marker, CLAIM_PREFIX + call_key, body)

    def _write_marker(self, key: str, body: bytes | None) -> None:
        try:
            if body is None:
                self.store.delete(key)
            else:
                self.store.replace(key, body)
        except StoreError as exc:
            # Others wait for this claim until this process's lease runs out; then they
            # find the reply stored (or send the call again). A store that does not answer
            # stops the stage, which says so once.
            say = log.info if isinstance(exc, StoreUnreachable) else log.warning
            say("claim %s could not be settled: %s", key, exc)

    def publishing(self, name: str) -> None:
        """A writer is about to publish a reply file of this name."""
        with self._lock:
            self.view.expect(name)

    def published(self, path: Path | None, stored: list[str], settled: set[str]) -> None:
        """A writer published `path` holding the replies of `stored`: let the view see them,
        then mark those calls stored and give up the claims of the calls that failed."""
        if path is not None:
            with self._lock:
                self.view.add_file(path, stored)
        done = set(stored)
        name = path.name if path is not None else None
        for call_key in settled:
            self._settle(call_key, stored=call_key in done, file=name)

    def release(self, call_keys: Iterable[str]) -> None:
        """Give up these claims without a reply (keys not held here are ignored)."""
        for call_key in call_keys:
            self._settle(call_key, stored=False, file=None)

    @property
    def held(self) -> int:
        return len(self._held)

    def close(self) -> None:
        """Release every claim, wait for the markers, and let go of the lease."""
        if self._closed:
            return
        self._closed = True
        _LIVE_CLAIMANTS.discard(self.claimant)
        self.release(list(self._held))
        self._markers.shutdown(wait=True)
        self.lease.let_go()
