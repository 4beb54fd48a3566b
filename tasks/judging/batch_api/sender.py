"""The batch sender: a judge stage's calls to judges with `batch: true` go as provider batches.

Per judge, the calls are cut into batches within the API's request and byte limits. Each
batch is journaled (`journal`) before it is submitted and polled until it ends, with a
backoff from `PollSchedule.first_s` to `max_s` (an `asyncio.sleep` between polls: a run
waiting hours for a batch holds no thread and sends a few requests an hour). Its results go
to the same cache as direct replies, under the same call keys. Calls the journal shows in a
batch not yet done are not submitted again: that batch is polled instead. Calls to judges
without `batch` go the direct way (`fallback`, else `tasks.judging.batches.send_all`).

A batch is marked done only once its results are published: a full disk or an absent store
stops the stage (`StopRequest.disk_full`) with the batches not stored still `submitted`,
and the resume fetches their results from the provider again (a download, not a call).
The provider's batch id is what keeps them, so its journal entry is written even into the
cache writer's reserve of space once the disk is full.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from schemas.calls import AttemptRecord, ReplyRecord
from schemas.judge import JudgeSpec
from schemas.vocabulary import ErrorCategory
from tasks.errors import StoreUnreachable
from tasks.judging.attempts import attempt_record, reply_record
from tasks.judging.batch_api.anthropic import AnthropicBatches
from tasks.judging.batch_api.api import BatchApi, BatchApiError, Outcome
from tasks.judging.batch_api.journal import BatchEntry, BatchJournal
from tasks.judging.batch_api.openai import OpenAIBatches
from tasks.judging.batches import RESERVE_BOUNDS, Batch, Session, judge_batch, send_all
from tasks.judging.claims import StoredKeyView
from tasks.judging.client import aresolve_api_key
from tasks.judging.failures import CallFailure
from tasks.judging.planned import PlannedCall
from tasks.judging.request import JudgeRequest, RemoteSender
from tasks.judging.stopping import StopRequest
from tasks.judging.tally import Tally
from tasks.judging.writer import CacheWriter
from tasks.store.workdir import disk_full

__all__ = [
    "PollSchedule",
    "ProviderBatch",
    "await_batch",
    "batch_api",
    "batch_sender",
    "split_lines",
]

log = logging.getLogger(__name__)

_ENDED_WITHOUT: dict[str, ErrorCategory] = {
    "expired": "expired",
    "cancelled": "cancelled",
    "canceled": "cancelled",
    "failed": "bad_request",
}


@dataclass(frozen=True)
class PollSchedule:
    """Seconds to the first poll, growth factor, and longest pause between polls."""

    first_s: float = 5.0
    factor: float = 1.5
    max_s: float = 300.0


def batch_api(spec: JudgeSpec, api_key: str | None) -> BatchApi:
    """The judge's batch API client."""
    return (
        AnthropicBatches(spec, api_key)
        if spec.provider == "anthropic"
        else OpenAIBatches(spec, api_key)
    )


def split_lines(lines: list[dict[str, Any]], max_requests: int, max_bytes: int
                ) -> list[list[dict[str, Any]]]:  # fmt: skip
    """Request lines cut into batches of at most `max_requests` lines and `max_bytes` bytes
    (as JSONL; a little under the limit, to leave room for the request's own framing)."""
    room = int(max_bytes * 0.98)
    out: list[list[dict[str, Any]]] = []
    size = 0
    for line in lines:
        n = len(json.dumps(line).encode("utf-8")) + 1
        if not out or len(out[-1]) >= max_requests or size + n > room:
            out.append([])
            size = 0
        out[-1].append(line)
        size += n
    return out


class ProviderBatch:
    """One provider batch to wait for, with what storing its results needs (a plain class:
    Prefect leaves it opaque)."""

    def __init__(self, api: BatchApi, entry: BatchEntry, calls: dict[str, PlannedCall], *,
                 journal: BatchJournal, writer: CacheWriter, tally: Tally, run_id: str,
                 schedule: PollSchedule, stop: StopRequest,
                 failure: CallFailure | None = None) -> None:  # fmt: skip
        self.api = api
        self.entry = entry
        self.calls = calls
        self.journal = journal
        self.writer = writer
        self.tally = tally
        self.run_id = run_id
        self.schedule = schedule
        self.stop = stop
        self.failure = failure
        """Set when the batch was refused at submission: every call failed with it."""
        self.judge = entry.judge
        self.index = entry.batch_id or entry.local_id

    def __repr__(self) -> str:
        return f"<provider batch {self.judge} {self.index}: {len(self.entry.call_keys)} calls>"


def _started(entry: BatchEntry) -> dt.datetime:
    return dt.datetime.fromisoformat(entry.created_at)


async def await_batch(job: ProviderBatch) -> dict[str, int]:
    """Poll the batch until it ends (backing off), store every result, mark it done.

    Returns counts: `stored` and `failed_<category>`, over the calls this run wanted. Once
    the stage is stopping (`job.stop`), or its results cannot be published, the batch is
    left `submitted` for the resume to fetch (`Tally.at_provider`), and counts nothing.
    """
    entry, schedule, stop = job.entry, job.schedule, job.stop
    outcomes: dict[str, Outcome] = {}
    missing: CallFailure | None = job.failure
    if missing is None and entry.batch_id is not None:
        pause = schedule.first_s
        while not stop.requested and not (status := await job.api.poll(entry.batch_id)).ended:
            await stop.pause(pause)
            pause = min(schedule.max_s, pause * schedule.factor)
        if stop.requested:
            return _left_at_provider(job)
        ms = (dt.datetime.now(dt.UTC) - _started(entry)).total_seconds() * 1000
        outcomes = await job.api.results(entry.batch_id, ms)
        category = _ENDED_WITHOUT.get(status.status, "server_error")
        detail = f"batch {entry.batch_id} ended {status.status} without a result for it"
        missing = CallFailure(category, detail, ms)
    counts: Counter[str] = Counter()
    records = []
    for key in entry.call_keys:
        outcome = outcomes.get(key) or missing
        assert outcome is not None
        reply, attempt = _records(job, key, call := job.calls.get(key), outcome)
        job.writer.add(reply, [attempt])
        records.append((call, reply, attempt))
    await job.writer.flush()
    if job.writer.full is not None and job.failure is None:
        return _left_at_provider(job)  # not all published: the provider still has them
    for call, reply, attempt in records:
        if call is not None:
            why = None if reply is not None else attempt.error_category
            job.tally.record(reply is not None, why)
            counts["stored" if reply is not None else f"failed_{why}"] += 1
    entry.state = "done" if job.failure is None else "abandoned"
    _write_entry(job.journal, entry, job.writer)
    return dict(counts)


def _left_at_provider(job: ProviderBatch) -> dict[str, int]:
    """A batch whose results the resume fetches: named for the stage's message."""
    if job.entry.batch_id is not None and job.failure is None:
        job.tally.at_provider[job.entry.batch_id] = list(job.calls)
    return {}


def _write_entry(journal: BatchJournal, entry: BatchEntry, writer: CacheWriter) -> bool:
    """Write a journal entry, into the writer's reserve of space if the disk is full; False
    (the stage told to stop) if even that fails or the store does not answer."""
    for last in (False, True):
        try:
            journal.write(entry)
            return True
        except (OSError, StoreUnreachable) as exc:
            if not (disk_full(exc) or isinstance(exc, StoreUnreachable)):
                raise
            writer.filled(exc)  # frees the reserve, and stops the stage
            if last or isinstance(exc, StoreUnreachable):
                log.info("provider batch %s not journaled %s: %s", entry.local_id,
                         entry.state, exc)  # fmt: skip
                return False
    return False


def _records(job: ProviderBatch, key: str, call: PlannedCall | None,
             outcome: Outcome) -> tuple[ReplyRecord | None, AttemptRecord]:  # fmt: skip
    """The reply (if any) and the attempt of one result, as the direct path records them."""
    number = (call.attempts_before if call is not None else 0) + 1
    started = _started(job.entry)
    if isinstance(outcome, CallFailure):
        return None, attempt_record(outcome, key, job.run_id, number, started)
    reply = reply_record(outcome, key, job.api.spec, sent_in_batch=True)
    return reply, attempt_record(outcome, key, job.run_id, number, started)


Waiter = Callable[[ProviderBatch], Awaitable[dict[str, int]]]
"""Waits for one provider batch and stores it (`await_batch`, or a Prefect task of it)."""


async def _jobs_for(api: BatchApi, calls: list[PlannedCall], journal: BatchJournal,
                    make: Callable[..., ProviderBatch], writer: CacheWriter,
                    stop: StopRequest) -> list[ProviderBatch]:  # fmt: skip
    """Adopt the journal's open batches that hold some of `calls`; submit the rest (none
    once the stage is stopping)."""
    spec = api.spec
    wanted = {c.call_key: c for c in calls}
    jobs: list[ProviderBatch] = []
    for entry in journal.open_entries():
        if not entry.serves(spec.provider, api.root, spec.model):
            continue
        if not wanted.keys() & set(entry.call_keys):
            continue
        if entry.batch_id is None:
            entry.batch_id = await api.find(entry.local_id)
            entry.state = "submitted" if entry.batch_id else "abandoned"
            _write_entry(journal, entry, writer)
            if entry.batch_id is None:
                continue
        log.info("judge %s: polling batch %s again (%d calls)", spec.name, entry.batch_id,
                 len(entry.call_keys))  # fmt: skip
        mine = {k: wanted.pop(k) for k in entry.call_keys if k in wanted}
        jobs.append(make(entry, mine))
    lines = [api.line(c) for c in wanted.values()]
    for chunk in split_lines(lines, api.max_requests, api.max_bytes):
        if stop.requested:
            break
        keys = [line["custom_id"] for line in chunk]
        try:
            entry = journal.new(spec.name, spec.provider, api.root, spec.model, keys)
        except (OSError, StoreUnreachable) as exc:
            if not (disk_full(exc) or isinstance(exc, StoreUnreachable)):
                raise
            writer.filled(exc)  # not submitted: nothing paid
            break
        mine = {k: wanted[k] for k in keys}
        try:
            entry.batch_id = await api.submit(entry.local_id, chunk)
        except BatchApiError as exc:
            jobs.append(make(entry, mine, failure=exc.failure))
            continue
        entry.state = "submitted"
        jobs.append(job := make(entry, mine))
        if not _write_entry(journal, entry, writer):
            job.tally.unjournaled.append(entry.batch_id)  # in no journal: the message names it
    return jobs


RESERVE_PER_CALL = 128
"""Bytes of the cache writer's reserve per call: room to write a journal entry again (a
call key and its line in the entry's JSON) once the disk is full."""


async def send_provider_batches(
    request: JudgeRequest,
    calls: list[PlannedCall],
    tally: Tally,
    wait: Waiter,
    schedule: PollSchedule,
    stop: StopRequest,
) -> list[dict[str, int]]:
    """Submit (or adopt) every batch of `calls`, then wait for all of them."""
    journal = BatchJournal(request.work)
    by_judge: dict[str, list[PlannedCall]] = {}
    for call in calls:
        by_judge.setdefault(call.judge.name, []).append(call)
    apis: list[BatchApi] = []
    low, high = RESERVE_BOUNDS
    reserve = min(high, max(low, RESERVE_PER_CALL * len(calls)))
    try:
        async with CacheWriter(request.work, reserve_bytes=reserve, on_full=stop.disk_full
                               ) as writer:  # fmt: skip

            def make(entry: BatchEntry, mine: dict[str, PlannedCall],
                     failure: CallFailure | None = None) -> ProviderBatch:  # fmt: skip
                return ProviderBatch(
                    apis[-1], entry, mine, journal=journal, writer=writer, tally=tally,
                    run_id=request.run_id, schedule=schedule, stop=stop, failure=failure,
                )  # fmt: skip

            jobs: list[ProviderBatch] = []
            for group in by_judge.values():
                spec = group[0].judge
                apis.append(batch_api(spec, await aresolve_api_key(spec)))
                jobs += await _jobs_for(apis[-1], group, journal, make, writer, stop)
            return list(await asyncio.gather(*(wait(job) for job in jobs)))
    finally:
        for api in apis:
            await api.aclose()


def batch_sender(
    request: JudgeRequest,
    *,
    fallback: RemoteSender | None = None,
    run_batch: Callable[[Batch, Session], Awaitable[dict[str, int]]] = judge_batch,
    wait: Waiter = await_batch,
    schedule: PollSchedule | None = None,
) -> RemoteSender | None:
    """A `StageHooks.sender` sender for a request with `batch: true` judges (else `fallback`).

    Calls of batch judges go as provider batches, each waited for by `wait`; the others go
    through `fallback` if given, else in this event loop through `run_batch`.
    """
    if not any(j.batch for j in request.judges):
        return fallback
    polls = schedule or PollSchedule()

    async def send(request: JudgeRequest, to_send: list[PlannedCall], tally: Tally,
                   stop: StopRequest) -> list[dict[str, int]]:  # fmt: skip
        batched = [c for c in to_send if c.judge.batch]
        direct = [c for c in to_send if not c.judge.batch]
        parts: list[Awaitable[list[Any]]] = []
        if batched:
            parts.append(send_provider_batches(request, batched, tally, wait, polls, stop))
        if direct and fallback is not None:
            parts.append(fallback(request, direct, tally, stop))
        elif direct:
            fresh = StoredKeyView(request.work)
            parts.append(send_all(request, direct, tally, fresh, run_batch, stop=stop))
        started = time.perf_counter()
        done = await asyncio.gather(*parts)
        log.debug("run %s: batches done in %.1f s", request.run_id, time.perf_counter() - started)
        return [counts for part in done for counts in part]

    return send
