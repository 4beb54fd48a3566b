"""Batches of judge calls in this process: split, send through pooled clients, count.

Each batch (hundreds of calls) is one unit of work, which a flow runs as a Prefect task
(`flows/judge.py`); batches run in the flow's event loop and share one pooled client per
judge, so the judge's latency and rate limit are the only limits. Replies reach the cache
as they arrive.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Awaitable, Callable

from tasks.judging.claims import StoredKeyView
from tasks.judging.client import JudgeClient, aresolve_api_key
from tasks.judging.planned import PlannedCall
from tasks.judging.prompt_cache import ordered
from tasks.judging.request import JudgeRequest
from tasks.judging.sharing import call_claims
from tasks.judging.stopping import StopRequest
from tasks.judging.tally import Tally
from tasks.judging.writer import CacheWriter

__all__ = [
    "RESERVE_BOUNDS",
    "RESERVE_PER_CALL",
    "Batch",
    "Session",
    "journal_reserve",
    "judge_batch",
    "send_all",
    "send_batch",
    "split_batches",
]


class Session:
    """What the batches of one run share: a client per judge, the cache writer, the tally.

    A plain class on purpose: Prefect walks dataclass and list parameters looking for
    futures, which would cost time per call; it leaves this opaque.
    """

    def __init__(self, clients: dict[str, JudgeClient], writer: CacheWriter, tally: Tally):
        self.clients = clients
        self.writer = writer
        self.tally = tally


class Batch:
    """Up to `batch_size` calls of one judge (opaque to Prefect, like `Session`)."""

    def __init__(self, judge: str, index: int, calls: list[PlannedCall]) -> None:
        self.judge = judge
        self.index = index
        self.calls = calls

    def __repr__(self) -> str:
        return f"<batch {self.judge}#{self.index}: {len(self.calls)} calls>"


def split_batches(calls: list[PlannedCall], batch_size: int) -> list[Batch]:
    """The calls cut into batches of one judge each, numbered per judge, in call order.

    The calls of one prompt (`PlannedCall.prompt`: its K repeats) of a judge that orders
    them (`tasks.judging.prompt_cache.ordered`) are gathered where the first of them comes
    and kept in one batch (cut only if they alone exceed `batch_size`), so `send_batch` can
    send the first and its repeats after it.
    """
    by_judge: dict[str, list[list[PlannedCall]]] = {}
    prompts: dict[tuple[str, str, str], list[PlannedCall]] = {}
    for c in calls:
        if ordered(c.judge) and c.prompt in prompts:
            prompts[c.prompt].append(c)
            continue
        group = [c]
        if ordered(c.judge):
            prompts[c.prompt] = group
        by_judge.setdefault(c.judge.name, []).append(group)
    return [
        Batch(judge, index, chunk)
        for judge, groups in by_judge.items()
        for index, chunk in enumerate(_cut(groups, batch_size))
    ]


def _cut(groups: list[list[PlannedCall]], size: int) -> list[list[PlannedCall]]:
    """Consecutive groups in chunks of at most `size` calls, a group cut only if it alone
    exceeds `size`."""
    chunks: list[list[PlannedCall]] = [[]]
    for group in groups:
        if chunks[-1] and len(chunks[-1]) + len(group) > size:
            chunks.append([])
        for c in group:
            if len(chunks[-1]) == size:
                chunks.append([])
            chunks[-1].append(c)
    return [chunk for chunk in chunks if chunk]


async def send_batch(
    client: JudgeClient,
    writer: CacheWriter,
    calls: list[PlannedCall],
    record: Callable[[bool, str | None], None] | None = None,
    skip: Callable[[], None] | None = None,
) -> dict[str, int]:
    """Send calls through one client; each outcome is queued for the cache at once.

    The repeats of a prompt (`PlannedCall.prompt`) of a judge that orders them wait until
    the first call of that prompt in the batch has its answer (or its last failure): a
    provider's prompt cache holds a prompt only once a call of it was answered, so repeats
    sent together would all pay full price. They wait without holding a connection, and the
    batch's other prompts fill the judge's slots meanwhile.

    Returns counts: `stored`, `failed_<category>` and `held` (not sent: the judge config's
    breaker is open; such calls stay pending). Shared by the in-process batches and the
    batches that run on Dask workers (`tasks.judging.dask_batches`).
    """
    answered: dict[tuple[str, str, str], asyncio.Event] = {}

    async def one(call: PlannedCall) -> tuple[bool, str | None] | None:
        first = answered.get(call.prompt) if ordered(call.judge) else None
        mine = None
        if first is not None:
            await first.wait()
        elif ordered(call.judge):
            mine = answered[call.prompt] = asyncio.Event()
        try:
            result = await client.send(call.request())
        finally:
            if mine is not None:
                mine.set()
        if result.held:
            return None
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
    for outcome in outcomes:
        if outcome is None:
            counts["held"] += 1
            continue
        ok, category = outcome
        counts["stored" if ok else f"failed_{category}"] += 1
    await writer.flush()
    return dict(counts)


async def judge_batch(batch: Batch, session: Session) -> dict[str, int]:
    """Send one batch of uncached calls; each outcome is queued for the cache at once."""
    return await send_batch(
        session.clients[batch.judge],
        session.writer,
        batch.calls,
        session.tally.record,
        session.tally.skip,
    )


RESERVE_PER_CALL = 64 * 1024
"""Journal space held per call that may be in flight (a long reasoning reply is tens of KB
as a journal line), so that a full disk loses none of them."""
RESERVE_BOUNDS = (1 << 20, 64 << 20)


def journal_reserve(request: JudgeRequest) -> int:
    """The journal's reserve for a stage (`tasks.judging.journal.Reserve`): room for every
    call its judges may have in flight, within `RESERVE_BOUNDS`."""
    in_flight = sum(j.max_concurrency for j in request.judges)
    low, high = RESERVE_BOUNDS
    return min(high, max(low, in_flight * RESERVE_PER_CALL))


async def send_all(
    request: JudgeRequest,
    to_send: list[PlannedCall],
    tally: Tally,
    fresh: StoredKeyView,
    run_batch: Callable[[Batch, Session], Awaitable[dict[str, int]]] = judge_batch,
    stop: StopRequest | None = None,
) -> list[dict[str, int]]:
    """Run the batches, at most enough at once to keep every judge's connections busy.

    Each call is claimed before it is sent (`call_claims` over `fresh`): a call another run
    sharing the cache is sending waits for it, and is not sent if that run stores it. Once
    `stop` is requested no call starts; calls not sent stay pending. The cache writer tells
    `stop` when the disk is full (`StopRequest.disk_full`).
    """
    batches = split_batches(to_send, request.batch_size)
    needed = {b.judge for b in batches}
    clients: dict[str, JudgeClient] = {}
    limits: dict[str, asyncio.Semaphore] = {}

    async def bounded(batch: Batch, session: Session) -> dict[str, int]:
        async with limits[batch.judge]:
            return await run_batch(batch, session)

    claims = call_claims(request.work, fresh, run_id=request.run_id)
    try:
        # Inside the try: a key that fails to resolve still closes the clients made so far.
        for spec in request.judges:
            if spec.name in needed:
                key = await aresolve_api_key(spec)
                clients[spec.name] = JudgeClient(
                    spec, key, run_id=request.run_id, claims=claims, stop=stop
                )
                # One extra batch in flight lets the next batch fill slots as one drains.
                slots = math.ceil(spec.max_concurrency / request.batch_size) + 1
                limits[spec.name] = asyncio.Semaphore(slots)
        writer = CacheWriter(
            request.work,
            claims=claims,
            reserve_bytes=journal_reserve(request),
            on_full=stop.disk_full if stop is not None else None,
        )
        try:
            async with writer:
                session = Session(clients, writer, tally)
                return list(await asyncio.gather(*(bounded(b, session) for b in batches)))
        finally:
            tally.lost += writer.lost
    finally:
        tally.add_trips(t for client in clients.values() for t in client.tripped)
        tally.timed_out += sum(client.timed_out for client in clients.values())
        claims.close()
        for client in clients.values():
            await client.aclose()
