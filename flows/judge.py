"""The judge-call flow: plan a run's calls, send the uncached ones in batches, record all.

Each batch (hundreds of calls) is one Prefect task; batches run in the flow's event loop
and share one pooled client per judge, so the judge's latency and rate limit are the only
limits. Replies reach the cache as they arrive; a cached call is never sent again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from schemas.judge import JudgeSpec
from tasks.errors import InputError, IntegrityError
from tasks.ingest.manifest import read_manifest
from tasks.judging.cache import CacheWriter, compact, read_attempts, recover, stored_keys
from tasks.judging.claims import CallClaims, RunLock, StoredKeyView
from tasks.judging.client import JudgeClient, aresolve_api_key
from tasks.judging.planned import (
    PlannedCall,
    attempts_made,
    call_records,
    last_failures,
    plan_calls,
)
from tasks.plan import read_plan
from tasks.storage import write_json_atomic, write_parquet_atomic
from tasks.templates import DEFAULT_TEMPLATE, get_template
from tasks.workdir import WorkDir

CALLS_FILE = "calls.parquet"
RUN_FILE = "run.json"
COMPACT_AT = 256
"""Reply files in the cache above which a run compacts it (reading many small files costs
a few ms each; one merged file reads in one scan)."""


class _Tally:
    """Counts and the optional rich progress bar of one run (calls done / cached / failed)."""

    def __init__(self, total: int, cached: int, show: bool) -> None:
        self.sent = 0
        self.stored = 0
        self.failed: Counter[str] = Counter()
        self.skipped = 0
        self.started = time.monotonic()
        self._progress: Progress | None = None
        self._task: Any = None
        if show:
            self._progress = Progress(
                TextColumn("[bold]judge calls"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("cached {task.fields[cached]}  failed {task.fields[failed]}"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                refresh_per_second=4,
            )
            self._task = self._progress.add_task(
                "calls", total=total, completed=cached, cached=cached, failed=0, rate=""
            )
            self._progress.start()

    def record(self, ok: bool, category: str | None) -> None:
        self.sent += 1
        if ok:
            self.stored += 1
        else:
            self.failed[category or "unknown"] += 1
        if self._progress is not None:
            rate = self.sent / max(time.monotonic() - self.started, 1e-9)
            self._progress.update(
                self._task, advance=1, failed=sum(self.failed.values()), rate=f"{rate:,.0f} calls/s"
            )

    def record_batch(self, counts: Mapping[str, int]) -> None:
        """Count a whole batch's outcomes at once (a batch that ran in another process):
        `stored`, `skipped` and `failed_<category>`."""
        for outcome, n in counts.items():
            category = None if outcome == "stored" else outcome.removeprefix("failed_")
            for _ in range(n):
                if outcome == "skipped":
                    self.skip()
                else:
                    self.record(outcome == "stored", category)

    def skip(self) -> None:
        """A call not sent after all: another run stored its reply while it waited."""
        self.skipped += 1
        if self._progress is not None:
            self._progress.update(self._task, advance=1)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


class _Session:
    """What the batches of one run share: a client per judge, the cache writer, the tally.

    A plain class on purpose: Prefect walks dataclass and list parameters looking for
    futures, which would cost time per call; it leaves this opaque.
    """

    def __init__(self, clients: dict[str, JudgeClient], writer: CacheWriter, tally: _Tally):
        self.clients = clients
        self.writer = writer
        self.tally = tally


class _Batch:
    """Up to `batch_size` calls of one judge (opaque to Prefect, like `_Session`)."""

    def __init__(self, judge: str, index: int, calls: list[PlannedCall]) -> None:
        self.judge = judge
        self.index = index
        self.calls = calls

    def __repr__(self) -> str:
        return f"<batch {self.judge}#{self.index}: {len(self.calls)} calls>"


async def send_batch(
    client: JudgeClient,
    writer: CacheWriter,
    calls: list[PlannedCall],
    record: Callable[[bool, str | None], None] | None = None,
    skip: Callable[[], None] | None = None,
) -> dict[str, int]:
    """Send calls through one client; each outcome is queued for the cache at once.

    Returns counts: `stored` and `failed_<category>`. Shared by the in-process batches and
    the batches that run on Dask workers (`flows.judge_dask`).
    """

    async def one(call: PlannedCall) -> tuple[bool, str | None]:
        result = await client.send(call.request())
        if result.skipped:
            if skip is not None:
                skip()
            return True, None
        writer.add(result.reply, result.attempts)
        category = result.failure.category if result.failure else None
        if record is not None:
            record(result.reply is not None, category)
        return result.reply is not None, category

    outcomes = await asyncio.gather(*(one(c) for c in calls))
    counts: Counter[str] = Counter()
    for ok, category in outcomes:
        counts["stored" if ok else f"failed_{category}"] += 1
    await writer.flush()
    return dict(counts)


@task(name="judge-batch", cache_policy=NO_CACHE, task_run_name="judge-{batch.judge}-{batch.index}")
async def judge_batch(batch: _Batch, session: _Session) -> dict[str, int]:
    """Send one batch of uncached calls; each outcome is queued for the cache at once."""
    return await send_batch(
        session.clients[batch.judge],
        session.writer,
        batch.calls,
        session.tally.record,
        session.tally.skip,
    )


def _batches(calls: list[PlannedCall], batch_size: int) -> list[_Batch]:
    by_judge: dict[str, list[PlannedCall]] = {}
    for c in calls:
        by_judge.setdefault(c.judge.name, []).append(c)
    out: list[_Batch] = []
    for judge, items in by_judge.items():
        for i in range(0, len(items), batch_size):
            out.append(_Batch(judge, i // batch_size, items[i : i + batch_size]))
    return out


def _run_info(
    run_id: str, plan_id: str, manifest_hash: str, judges: list[JudgeSpec], template_id: str
) -> dict[str, Any]:
    # JudgeSpec holds the names of key sources only, never a key.
    return {
        "run_id": run_id,
        "plan_id": plan_id,
        "manifest_hash": manifest_hash,
        "template_id": template_id,
        "template_hash": get_template(template_id).template_hash,
        "judges": [j.model_dump(mode="json") for j in judges],
    }


def _check_run_info(path: Path, info: dict[str, Any]) -> None:
    import json

    if not path.exists():
        return
    old = json.loads(path.read_text("utf-8"))
    for field in ("plan_id", "manifest_hash", "template_id", "template_hash", "judges"):
        if old.get(field) != info[field]:
            raise IntegrityError(
                f"run {info['run_id']}: {path} was made with a different {field}; "
                "use a new --run-id for a different plan, template or judge set"
            )


async def _send_all(
    work: WorkDir,
    run_id: str,
    judges: list[JudgeSpec],
    to_send: list[PlannedCall],
    batch_size: int,
    tally: _Tally,
    fresh: StoredKeyView,
) -> list[dict[str, int]]:
    """Run the batches, at most enough at once to keep every judge's connections busy.

    Each call is claimed before it is sent (`CallClaims` over `fresh`): a call another run
    sharing the cache is sending waits for it, and is not sent if that run stores it.
    """
    batches = _batches(to_send, batch_size)
    needed = {b.judge for b in batches}
    clients: dict[str, JudgeClient] = {}
    limits: dict[str, asyncio.Semaphore] = {}

    async def bounded(batch: _Batch, session: _Session) -> dict[str, int]:
        async with limits[batch.judge]:
            return await judge_batch(batch, session)

    claims = CallClaims(work, fresh)
    try:
        # Inside the try: a key that fails to resolve still closes the clients made so far.
        for spec in judges:
            if spec.name in needed:
                key = await aresolve_api_key(spec)
                clients[spec.name] = JudgeClient(spec, key, run_id=run_id, claims=claims)
                # One extra batch in flight lets the next batch fill slots as one drains.
                slots = math.ceil(spec.max_concurrency / batch_size) + 1
                limits[spec.name] = asyncio.Semaphore(slots)
        async with CacheWriter(work, claims=claims) as writer:
            session = _Session(clients, writer, tally)
            return list(await asyncio.gather(*(bounded(b, session) for b in batches)))
    finally:
        claims.close()
        for client in clients.values():
            await client.aclose()


async def run_judge_stage(
    work: WorkDir,
    run_id: str,
    plan_id: str,
    judges: list[JudgeSpec],
    template_id: str = DEFAULT_TEMPLATE,
    batch_size: int = 500,
    *,
    only_keys: set[str] | None = None,
    show_progress: bool = False,
    dask_address: str | None = None,
) -> dict[str, Any]:
    """The judge stage without Prefect's flow wrapper (batches are still Prefect tasks).

    Batches run in this event loop, or on a Dask cluster (`flows.judge_dask`) when
    `dask_address` (or $JUDGELINE_DASK_ADDRESS) is given or the flow's task runner is a
    `prefect_dask.DaskTaskRunner`.
    """
    if batch_size < 1:
        raise InputError(f"batch size must be at least 1, not {batch_size}")
    if not judges:
        raise InputError("no judges given")
    names = [j.name for j in judges]
    if len(set(names)) != len(names):
        raise InputError(f"judge names must be unique, got {names}")
    get_template(template_id)
    plan_info, presentations = read_plan(work, plan_id)
    _, manifest = read_manifest(work, plan_info.manifest_hash)
    info = _run_info(run_id, plan_id, plan_info.manifest_hash, judges, template_id)
    _check_run_info(work.runs / run_id / RUN_FILE, info)
    planned = plan_calls(manifest, presentations, judges, template_id, run_id)
    if only_keys is not None:
        missing = only_keys - {c.call_key for c in planned}
        if missing:
            raise IntegrityError(
                f"run {run_id}: {len(missing)} recorded call keys are not planned any more "
                f"(e.g. {sorted(missing)[0]}); the plan, template or judges changed"
            )
    # Checked inputs first: a refused run leaves no run folder behind.
    with RunLock(work, run_id):
        _check_run_info(work.run_dir(run_id) / RUN_FILE, info)  # again, now that it is ours
        return await _judge_planned(
            work, run_id, plan_id, judges, planned, info, batch_size, only_keys,
            show_progress, dask_address,
        )  # fmt: skip


async def _judge_planned(
    work: WorkDir,
    run_id: str,
    plan_id: str,
    judges: list[JudgeSpec],
    planned: list[PlannedCall],
    info: dict[str, Any],
    batch_size: int,
    only_keys: set[str] | None,
    show_progress: bool,
    dask_address: str | None,
) -> dict[str, Any]:
    """Send what is not stored yet and write the run's calls table and run.json."""
    run_dir = work.run_dir(run_id)
    recover(work)  # what an earlier, killed process received is stored before we look
    fresh = StoredKeyView(work)
    cached = fresh.keys
    unique: dict[str, PlannedCall] = {}
    for c in planned:
        wanted = only_keys is None or c.call_key in only_keys
        if wanted and c.call_key not in cached and c.call_key not in unique:
            unique[c.call_key] = c
    to_send = list(unique.values())
    if to_send:
        made = attempts_made(read_attempts(work), unique)
        for call in to_send:
            call.attempts_before = made.get(call.call_key, 0)
    # A random order per run: two runs sharing the cache then rarely want the same call
    # at the same moment, and each skips what the other stored, instead of sending the
    # same calls in lockstep. Replies do not depend on the order.
    random.shuffle(to_send)
    total_keys = len({c.call_key for c in planned})

    tally = _Tally(total_keys, total_keys - len(to_send), show_progress)
    started = time.perf_counter()
    try:
        if to_send:
            from flows.judge_dask import dask_sender

            sender = dask_sender(dask_address, plan_id)
            if sender is not None:
                await sender(work, run_id, judges, to_send, batch_size, tally)
            else:
                await _send_all(work, run_id, judges, to_send, batch_size, tally, fresh)
    finally:
        tally.close()
    elapsed = time.perf_counter() - started

    if to_send and sum(1 for _ in work.replies.glob("*.parquet")) > COMPACT_AT:
        compact(work)
    stored = stored_keys(work) if to_send else cached
    unstored = {c.call_key for c in planned} - stored
    failures = last_failures(read_attempts(work), unstored) if unstored else {}
    records = call_records(planned, stored, failures)
    write_parquet_atomic(records, run_dir / CALLS_FILE, overwrite=True)
    counts = _counts(
        records,
        planned_keys=total_keys,
        cached=total_keys - len(to_send),
        sent=tally.sent,
        skipped=tally.skipped,
        elapsed=elapsed,
    )
    info["updated_at"] = dt.datetime.now(dt.UTC).isoformat()
    info["counts"] = counts
    write_json_atomic(info, run_dir / RUN_FILE, overwrite=True)
    return counts


def _counts(
    records: pa.Table,
    *,
    planned_keys: int,
    cached: int,
    sent: int,
    skipped: int,
    elapsed: float,
) -> dict[str, Any]:
    """The run's figures. Of the distinct calls (`unique_keys`), `cached` were stored
    before the run started, `sent` were sent, and `stored_by_other_runs` were not sent
    after all: another run sharing the cache stored them while this one waited."""
    status = Counter(records.column("status").to_pylist())
    categories = Counter(c for c in records.column("error_category").to_pylist() if c is not None)
    return {
        "planned": records.num_rows,
        "unique_keys": planned_keys,
        "cached": cached,
        "sent": sent,
        "stored_by_other_runs": skipped,
        "stored": status.get("stored", 0),
        "failed": status.get("failed", 0),
        "pending": status.get("pending", 0),
        "failed_by_category": dict(sorted(categories.items())),
        "send_seconds": round(elapsed, 3),
    }


@flow(name="judge-calls")
async def judge_flow(
    run_id: str,
    plan_id: str,
    judges: list[JudgeSpec],
    template_id: str = DEFAULT_TEMPLATE,
    batch_size: int = 500,
    work_dir: str | None = None,
    show_progress: bool = False,
    dask_address: str | None = None,
) -> dict[str, Any]:
    """Judge every planned call of a plan with every judge config; skip cached calls.

    `dask_address` (a Dask scheduler, e.g. `tcp://10.0.0.5:8786`) runs the batches there.
    """
    work = WorkDir.at(work_dir)
    counts = await run_judge_stage(
        work,
        run_id,
        plan_id,
        judges,
        template_id,
        batch_size,
        show_progress=show_progress,
        dask_address=dask_address,
    )
    get_run_logger().info("run %s: %s", run_id, counts)
    return counts


def read_run_info(work: WorkDir, run_id: str) -> dict[str, Any]:
    """A run's `run.json`, or an InputError naming the missing file."""
    import json

    path = work.root / "runs" / run_id / RUN_FILE
    if not path.is_file():
        raise InputError(f"no run {run_id!r}: {path} does not exist")
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


def unstored_call_keys(work: WorkDir, run_id: str) -> set[str]:
    """The planned call keys of a run that have no stored reply."""
    import pyarrow.parquet as pq

    path = work.root / "runs" / run_id / CALLS_FILE
    if not path.is_file():
        raise InputError(f"run {run_id!r} has no calls table: {path} does not exist")
    keys = set(pq.read_table(path, columns=["call_key"]).column("call_key").to_pylist())
    return keys - stored_keys(work)


@flow(name="judge-rerun-failed")
async def rerun_failed_flow(
    run_id: str,
    work_dir: str | None = None,
    show_progress: bool = False,
    dask_address: str | None = None,
) -> dict[str, Any]:
    """Send again exactly the planned calls of a run that have no stored reply."""
    work = WorkDir.at(work_dir)
    info = read_run_info(work, run_id)
    judges = [JudgeSpec.model_validate(j) for j in info["judges"]]
    counts = await run_judge_stage(
        work,
        run_id,
        info["plan_id"],
        judges,
        info["template_id"],
        only_keys=unstored_call_keys(work, run_id),
        show_progress=show_progress,
        dask_address=dask_address,
    )
    get_run_logger().info("rerun of %s: %s", run_id, counts)
    return counts
