"""The judge stage: plan a run's calls, send the uncached ones in batches, record them all.

A cached call is never sent again. The stage writes the run's `calls.parquet` (every
planned call with its status) and its `run.json` (what the calls were made from, and the
counts), holding the run's lock while it sends. SIGINT or SIGTERM stops it cleanly
(`tasks.judging.stopping`): the replies in flight are stored, then `Interrupted` is raised.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import gc
import random
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.run import RunInfo
from tasks.errors import (
    DiskFull,
    InputError,
    IntegrityError,
    Interrupted,
    StoreDown,
    StoreUnreachable,
)
from tasks.gates import preload_great_expectations
from tasks.ingest.manifest import read_manifest
from tasks.judging.batches import judge_batch, send_all
from tasks.judging.cache import compact, kept_keys, read_attempts, recover, stored_keys
from tasks.judging.claims import RunLock, StoredKeyView
from tasks.judging.planned import (
    PlannedCall,
    attempts_made,
    call_records,
    last_failures,
    plan_calls,
    sent_by_run,
)
from tasks.judging.request import JudgeRequest, StageHooks
from tasks.judging.stopping import GRACE_S, StopRequest, stop_on_signals
from tasks.judging.tally import Tally
from tasks.plan import read_plan
from tasks.prompts.templates import get_template
from tasks.runs.folder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.store.workdir import WorkDir, describe_filesystem, disk_full

__all__ = ["COMPACT_AT", "call_status_counts", "run_judge_stage", "unstored_call_keys"]

COMPACT_AT = 256
"""Reply files in the cache above which a run compacts it (reading many small files costs
a few ms each; one merged file reads in one scan)."""

SENDING_GEN0 = 10_000
"""The collector's youngest-generation threshold while calls are sent (`_collector_eased`)."""

_SAME_ORIGIN = ("plan_id", "manifest_hash", "template_id", "template_hash", "judges")


def _run_info(request: JudgeRequest, manifest_hash: str) -> RunInfo:
    # JudgeSpec holds the names of key sources only, never a key.
    return RunInfo(
        run_id=request.run_id,
        plan_id=request.plan_id,
        manifest_hash=manifest_hash,
        template_id=request.template_id,
        template_hash=get_template(request.template_id).template_hash,
        judges=[j.model_dump(mode="json") for j in request.judges],
    )


def _check_run_info(folder: RunFolder, info: RunInfo) -> None:
    """Refuse a run id whose `run.json` was made from another plan, template or judge set."""
    if not folder.info.exists():
        return
    old = folder.read_info()
    for field in _SAME_ORIGIN:
        if getattr(old, field) != getattr(info, field):
            raise IntegrityError(
                f"run {info.run_id}: {folder.info} was made with a different {field}; "
                "use a new --run-id for a different plan, template or judge set"
            )


async def run_judge_stage(
    request: JudgeRequest, *, show_progress: bool = False, hooks: StageHooks | None = None
) -> dict[str, Any]:
    """Send the request's uncached planned calls, then write the run's calls and run.json.

    Batches run in this event loop, each through `hooks.run_batch` (a Prefect task when a
    flow calls), or elsewhere when `hooks.sender` returns a sender for the request (a Dask
    cluster: `flows/dask.py`). Returns the run's counts.
    """
    request.check()
    work = request.work
    plan_info, presentations = read_plan(work, request.plan_id)
    _, manifest = read_manifest(work, plan_info.manifest_hash)
    info = _run_info(request, plan_info.manifest_hash)
    folder = RunFolder(work, request.run_id)
    _check_run_info(folder, info)
    planned = plan_calls(
        manifest,
        presentations,
        list(request.judges),
        request.template_id,
        request.run_id,
        request.scope,
    )
    if request.only_keys is not None:
        missing = request.only_keys - {c.call_key for c in planned}
        if missing:
            raise IntegrityError(
                f"run {request.run_id}: {len(missing)} recorded call keys are not planned any "
                f"more (e.g. {sorted(missing)[0]}); the plan, template or judges changed"
            )
    # Checked inputs first: a refused run leaves no run folder behind.
    with RunLock(work, request.run_id):
        _check_run_info(folder, info)  # again, now that it is ours
        return await _judge_planned(request, planned, info, show_progress, hooks or StageHooks())


def _to_send(
    request: JudgeRequest, planned: list[PlannedCall], cached: set[str], attempts: pa.Table
) -> list[PlannedCall]:
    """The distinct wanted calls with no stored reply, in a random order per run."""
    unique: dict[str, PlannedCall] = {}
    for c in planned:
        wanted = request.only_keys is None or c.call_key in request.only_keys
        if wanted and c.call_key not in cached and c.call_key not in unique:
            unique[c.call_key] = c
    to_send = list(unique.values())
    if to_send:
        made = attempts_made(attempts, unique)
        for call in to_send:
            call.attempts_before = made.get(call.call_key, 0)
    # A random order per run: two runs sharing the cache then rarely want the same call
    # at the same moment, and each skips what the other stored, instead of sending the
    # same calls in lockstep. Replies do not depend on the order.
    random.shuffle(to_send)
    return to_send


async def _judge_planned(
    request: JudgeRequest,
    planned: list[PlannedCall],
    info: RunInfo,
    show_progress: bool,
    hooks: StageHooks,
) -> dict[str, Any]:
    """Send what is not stored yet and write the run's calls table and run.json."""
    work = request.work
    folder = RunFolder(work, request.run_id).create()
    recover(work)  # what an earlier, killed process received is stored before we look
    fresh = StoredKeyView(work)
    cached = fresh.keys
    attempts = read_attempts(work)
    to_send = _to_send(request, planned, cached, attempts)
    total_keys = len({c.call_key for c in planned})

    # The bar counts the calls this stage wants (a wave, a rerun: not the whole grid).
    wanted = total_keys if request.only_keys is None else len(request.only_keys)
    tally = Tally(wanted, wanted - len(to_send), show_progress)
    stop = StopRequest(min([GRACE_S, *(j.request_timeout() for j in request.judges)]))
    started = time.perf_counter()
    if to_send:
        preload_great_expectations()  # the remap gate checks the new replies: load it now
    try:
        if to_send:
            sender = hooks.sender(request) if hooks.sender else None
            if sender is not None:
                await sender(request, to_send, tally, stop)
            else:
                with stop_on_signals(stop), _collector_eased():
                    run_batch = hooks.run_batch or judge_batch
                    await send_all(request, to_send, tally, fresh, run_batch, stop=stop)
    except (OSError, StoreUnreachable) as exc:
        if not (disk_full(exc) or isinstance(exc, StoreUnreachable)):
            raise
        stop.full = stop.full or exc  # e.g. no room for the journal's reserve: nothing sent
    finally:
        tally.close()
    elapsed = time.perf_counter() - started
    if stop.full is not None:
        # No room for the run's tables either (or no store to write them to): the replies
        # wait in the journal.
        raise _stopped(request, len(planned), to_send, tally, stop.full)

    if to_send and sum(1 for _ in work.replies.glob("*.parquet")) > COMPACT_AT:
        compact(work)
    stored = stored_keys(work) if to_send else cached
    keys = {c.call_key for c in planned}
    unstored = keys - stored
    attempts = read_attempts(work) if to_send else attempts
    failures = last_failures(attempts, unstored) if unstored else {}
    records = call_records(planned, stored, failures)
    write_parquet_atomic(records, folder.calls, overwrite=True)
    # The run's own figures over all its stages: what it sent (a resumed, rerun or rebuilt
    # run keeps what it paid for before) and what it reused that it did not send itself.
    sent = sent_by_run(attempts, request.run_id, keys)
    # Calls not sent after all, stored meanwhile by another run: not those a process of
    # this run stored and died before saying so (a Dask worker), which this run sent.
    others = len({c.call_key for c in to_send} & stored - sent)
    counts = {
        "planned": records.num_rows,
        "unique_keys": total_keys,
        "cached": len((stored & keys) - sent) - others,
        "sent": len(sent),
        "sent_now": tally.sent,
        "stored_by_other_runs": others,
        **call_status_counts(records),
        "send_seconds": round(elapsed, 3),
        # The judge configs a breaker stopped: why (the provider's first message), how
        # many failures it took and how many calls it held back (pending).
        "breaker_trips": [dataclasses.asdict(t) for t in tally.trips.values()],
        # Requests given up at their timeout: the provider may have answered (and billed)
        # them anyway; each call retries a timeout once at most (`RetryPolicy`).
        "timed_out": tally.timed_out,
    }
    info.updated_at = dt.datetime.now(dt.UTC).isoformat()
    info.counts = counts
    folder.write_info(info)
    if stop.signum is not None:
        raise Interrupted(request.run_id, stop.signum, counts)
    return counts


def _stopped(
    request: JudgeRequest, planned: int, to_send: list[PlannedCall], tally: Tally, full: Exception
) -> Interrupted:
    """A stage a full disk or an absent store stopped, as its error: what it kept is read from
    the work dir (the resume finds the same), not taken from what its senders counted."""
    work = request.work
    away = isinstance(full, StoreUnreachable)
    keys = {c.call_key for c in to_send}
    kept = kept_keys(work, keys, store_answers=not away) | (tally.published & keys)
    in_batches = {k for batch in tally.at_provider.values() for k in batch} & keys
    waiting = in_batches - kept
    failed = sum(tally.failed.values())
    counts: dict[str, Any] = {
        "planned": planned, "stored": len(kept), "sent": tally.sent + len(in_batches),
        "failed": failed, "at_provider": len(waiting),
        "provider_batches": len(tally.at_provider), "unkept": tally.lost,
        "unjournaled": tally.unjournaled,
        "pending": max(0, len(keys) - len(kept) - len(waiting) - failed - tally.lost),
    }  # fmt: skip
    if away:
        # The first request that went unanswered for the whole patience says it best.
        first = getattr(work.store, "down", None) or full
        return StoreDown(request.run_id, str(first), str(work.journal), counts)
    return DiskFull(request.run_id, describe_filesystem(work.journal), counts)


@contextlib.contextmanager
def _collector_eased() -> Iterator[None]:
    """While the calls go out, the cyclic collector runs rarely and leaves the objects made
    before alone; its objects and thresholds are handed back when the sending ends.

    Each call allocates hundreds of objects (httpx's, asyncio's, the records), so at the
    default threshold of 700 the youngest generation was collected some 650 times during
    the demo's 6,960 calls, promoting what was in flight into older generations, and each
    pass of the oldest walked every object of the process (Prefect, pandas, the plan's
    calls): 0.7 s of collection in all. With the old objects frozen (`gc.freeze`) and the
    youngest generation collected every `SENDING_GEN0` allocations: 0.2 s. (The `judgeline`
    command collects it less often still, `flows.entry.GC_THRESHOLDS`, which is kept.)"""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(SENDING_GEN0, threshold[0]), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def call_status_counts(calls: pa.Table) -> dict[str, Any]:
    """How many of a calls table's rows are stored, failed (by category) and pending.

    With the distinct calls (`unique_keys`) of a run's counts: `sent` were sent by the run
    in any of its stages (`sent_now`: in the latest one; a rebuild sends none), `cached`
    were stored by others and reused, and `stored_by_other_runs` were not sent after all
    (another run sharing the cache stored them while this one waited).
    """
    status = Counter(calls.column("status").to_pylist())
    categories = Counter(c for c in calls.column("error_category").to_pylist() if c is not None)
    return {
        "stored": status.get("stored", 0),
        "failed": status.get("failed", 0),
        "pending": status.get("pending", 0),
        "failed_by_category": dict(sorted(categories.items())),
    }


def unstored_call_keys(work: WorkDir, run_id: str) -> frozenset[str]:
    """The planned call keys of a run that have no stored reply."""
    path = RunFolder(work, run_id).calls
    if not path.is_file():
        raise InputError(f"run {run_id!r} has no calls table: {path} does not exist")
    keys = set(pq.read_table(path, columns=["call_key"]).column("call_key").to_pylist())
    return frozenset(keys - stored_keys(work))
