"""Judge batches on a Dask cluster (prefect-dask): each batch a self-contained worker task.

A worker process cannot share the flow's clients or cache writer, so a batch carries only
names: the work directory (a shared path, or an object store URL: then the worker reads
through its own scratch dir, `tasks.store`), plan, template, judge spec and its call keys.
The worker rebuilds those calls from the work directory with `plan_calls` (and refuses
keys that do not follow from it: a worker with other code or other files), opens its own
client, sends with `tasks.judging.batches.send_batch` and writes replies and attempts to the
shared cache as new, uniquely named, atomically published files. The flow then writes
calls.parquet from the cache exactly as it does after a local run.

A judge's `max_concurrency` and `requests_per_minute` are limits for the whole run: they
are divided evenly across the batches that can run at once (the cluster's worker threads).
API keys are resolved on the worker (its environment, or a Prefect Secret block through the
worker's own Prefect settings: none are shipped to it); they never travel with a task.

A worker keeps every reply as the flow's own loop does: journaled at once, into a reserve of
space once the disk is full. A worker that cannot write (a full disk, a store that stopped
answering) stops sending at once, like the flow's loop, and hands back what it could not
keep where the flow reads it (its result's `stopped` and `handed_back`): the rows it could
not journal, and on an object store every row not published (its journal is on its own
machine).
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from schemas.judge import JudgeSpec
from tasks.errors import InputError, IntegrityError, StoreUnreachable
from tasks.ingest.manifest import read_manifest
from tasks.judging.batches import RESERVE_BOUNDS, RESERVE_PER_CALL, send_batch, split_batches
from tasks.judging.client import JudgeClient, aresolve_api_key
from tasks.judging.planned import PlannedCall, plan_calls
from tasks.judging.request import JudgeRequest
from tasks.judging.sharing import Claims, call_claims
from tasks.judging.stopping import GRACE_S, StopRequest
from tasks.judging.writer import CacheWriter
from tasks.plan import read_plan
from tasks.store.workdir import WorkDir, disk_full

__all__ = [
    "DASK_ADDRESS_ENV",
    "RemoteBatch",
    "judge_batch_remote",
    "run_remote_batch",
    "rebuild_calls",
    "remote_batches",
]

DASK_ADDRESS_ENV = "JUDGELINE_DASK_ADDRESS"
"""Environment variable naming a Dask scheduler for every judge stage of a process (the
nightly and rerun-failed deployments read it too)."""


class RemoteBatch:
    """What a worker needs to rebuild and send one batch: names and call keys, no text.

    A plain class so Prefect leaves it opaque (it would walk lists looking for futures);
    picklable, so Dask ships it to any worker.
    """

    def __init__(
        self,
        *,
        work_root: str,
        run_id: str,
        plan_id: str,
        template_id: str,
        spec: JudgeSpec,
        index: int,
        share: int,
        calls: list[PlannedCall],
    ) -> None:
        self.work_root = work_root
        self.run_id = run_id
        self.plan_id = plan_id
        self.template_id = template_id
        self.spec = spec
        self.judge = spec.name
        self.index = index
        self.share = share
        """Batches of this judge that may run at once: each gets 1/share of its limits."""
        self.call_keys = [c.call_key for c in calls]
        self.attempts_before = {c.call_key: c.attempts_before for c in calls if c.attempts_before}
        self.presentation_ids = sorted({c.presentation_id for c in calls})

    def __repr__(self) -> str:
        return f"<remote batch {self.judge}#{self.index}: {len(self.call_keys)} calls>"

    def client_spec(self) -> JudgeSpec:
        """The judge spec with this batch's share of the concurrency and rate limits."""
        update: dict[str, Any] = {
            "max_concurrency": max(1, self.spec.max_concurrency // self.share)
        }
        if self.spec.requests_per_minute is not None:
            update["requests_per_minute"] = self.spec.requests_per_minute / self.share
        return self.spec.model_copy(update=update)


@functools.lru_cache(maxsize=4)
def _plan_tables(work_root: str, plan_id: str) -> tuple[pa.Table, pa.Table]:
    """(manifest, presentations) of a plan; both are write-once, so a worker keeps them."""
    work = WorkDir.at(work_root)
    # The flow gated both before planning; the call-key check below catches any other bytes.
    info, presentations = read_plan(work, plan_id, gate=False)
    _, manifest = read_manifest(work, info.manifest_hash, gate=False)
    return manifest, presentations


def _where() -> str:
    return f"{socket.gethostname()}/{os.getpid()}"


def rebuild_calls(batch: RemoteBatch) -> list[PlannedCall]:
    """The batch's planned calls, rebuilt from the work directory, in the batch's key order.

    Raises IntegrityError if a call key does not follow from the stored plan: this worker's
    code, templates or work directory differ from the flow's, and its replies would be
    stored under keys the flow never planned.
    """
    manifest, presentations = _plan_tables(batch.work_root, batch.plan_id)
    wanted = pa.array(batch.presentation_ids, type=pa.string())
    subset = presentations.filter(pc.is_in(presentations.column("presentation_id"), wanted))
    planned = plan_calls(manifest, subset, [batch.spec], batch.template_id, batch.run_id)
    by_key = {c.call_key: c for c in planned}
    missing = [k for k in batch.call_keys if k not in by_key]
    if missing:
        raise IntegrityError(
            f"batch {batch.judge}#{batch.index} on {_where()}: {len(missing)} of "
            f"{len(batch.call_keys)} call keys do not follow from plan {batch.plan_id} in "
            f"{batch.work_root} (e.g. {missing[0]}); the worker's code, templates or work "
            "directory differ from the flow's"
        )
    calls = [by_key[k] for k in batch.call_keys]
    for call in calls:
        call.attempts_before = batch.attempts_before.get(call.call_key, 0)
    return calls


async def judge_batch_remote(batch: RemoteBatch) -> dict[str, Any]:
    """Rebuild, send and store one batch in this (worker) process.

    Returns `{"counts": {"stored"|"skipped"|"held"|"failed_<category>": n}, "trips":
    [BreakerTrip], "timed_out": n, "worker": host/pid, "published": [call keys],
    "stopped": None | the error that stopped it, "handed_back": ([ReplyRecord],
    [AttemptRecord])}` (`trips`: the configs this batch's breaker stopped; `timed_out`:
    requests abandoned at their timeout; `stopped`: a full disk's OSError or a
    StoreUnreachable, and then `handed_back`: the rows the flow must keep).
    """
    work = WorkDir.at(batch.work_root)  # a path, or a store URL (copied to this worker's scratch)
    work.store.reached_by_the_flow()
    if work.url is None and not work.root.is_dir():
        raise InputError(
            f"batch {batch.judge}#{batch.index} on {_where()}: work directory {work.root} "
            "does not exist here; every worker must see the flow's work directory"
        )
    spec = batch.client_spec()
    key = await aresolve_api_key(spec)
    stop = StopRequest(min(GRACE_S, spec.request_timeout()))
    result: dict[str, Any] = {
        "counts": {}, "trips": [], "timed_out": 0, "worker": _where(), "published": [],
        "stopped": None, "handed_back": ([], []),
    }  # fmt: skip
    skipped = 0

    def skip() -> None:
        nonlocal skipped
        skipped += 1

    writer: CacheWriter | None = None
    try:
        calls = rebuild_calls(batch)
        # As in the flow's own loop: each call is claimed first, so a call another process
        # is sending waits for it and one it stored meanwhile is not sent.
        with _closing(call_claims(work, run_id=batch.run_id)) as claims:
            async with (
                JudgeClient(spec, key, run_id=batch.run_id, claims=claims, stop=stop) as client,
                CacheWriter(work, claims=claims, reserve_bytes=_reserve(spec),
                            on_full=stop.disk_full) as writer,
            ):  # fmt: skip
                counts = await send_batch(client, writer, calls, skip=skip)
                result.update(counts=counts, trips=client.tripped, timed_out=client.timed_out)
    except (OSError, StoreUnreachable) as exc:
        if not (disk_full(exc) or isinstance(exc, StoreUnreachable)):
            raise
        stop.full = stop.full or exc  # e.g. no room for the reserve: nothing sent
    counts = result["counts"]
    if skipped:
        # send_batch counts a skipped call as stored (it is); the tally tells them apart.
        counts["stored"] -= skipped
        counts["skipped"] = skipped
        if not counts["stored"]:
            del counts["stored"]
    if writer is not None:
        result["published"] = sorted(writer.published)
    if stop.full is not None:
        result["stopped"] = stop.full
        if writer is not None:
            result["handed_back"] = _handed_back(work, writer)
    return result


def run_remote_batch(batch: RemoteBatch) -> dict[str, Any]:
    """`judge_batch_remote` as the plain function a Dask worker runs."""
    return asyncio.run(judge_batch_remote(batch))


def _reserve(spec: JudgeSpec) -> int:
    """The journal's reserve of a batch: room for every call its client may have in flight."""
    low, high = RESERVE_BOUNDS
    return min(high, max(low, spec.max_concurrency * RESERVE_PER_CALL))


def _handed_back(work: WorkDir, writer: CacheWriter) -> tuple[list[Any], list[Any]]:
    """The rows of a stopped batch the flow must keep: those its journal could not take,
    where the flow finds the journal (a shared disk's), else every row not published (on an
    object store this machine's journal is not the flow's)."""
    if not writer.journal.seen_by_every_process:
        return writer.unpublished
    replies = [reply for reply, _ in writer.unkept if reply is not None]
    return replies, [a for _, attempts in writer.unkept for a in attempts]


@contextmanager
def _closing(claims: Claims) -> Iterator[Claims]:
    try:
        yield claims
    finally:
        claims.close()


def remote_batches(
    request: JudgeRequest, to_send: list[PlannedCall], threads: int
) -> list[RemoteBatch]:
    """The request's calls cut into batches for `threads` worker threads: each batch gets an
    even share of its judge's concurrency and rate limit."""
    specs = {j.name: j for j in request.judges}
    local = split_batches(to_send, request.batch_size)
    per_judge = Counter(b.judge for b in local)
    return [
        RemoteBatch(
            work_root=request.work.address,
            run_id=request.run_id,
            plan_id=request.plan_id,
            template_id=b.calls[0].template_id,
            spec=specs[b.judge],
            index=b.index,
            share=min(per_judge[b.judge], threads),
            calls=b.calls,
        )
        for b in local
    ]
