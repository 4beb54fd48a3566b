"""Judge batches on a Dask cluster through prefect-dask: which cluster, and the batches.

The batch itself (rebuilding its calls on the worker, sending, storing) is
`tasks.judging.dask_batches`; this module connects to the scheduler (prefect-dask's
`DaskTaskRunner`, or the flow's own) and submits each batch to its Dask client as a plain
function. Not as a Prefect task: Prefect's task context would travel with it, pickled, over
Dask's unauthenticated wire to the scheduler and every worker, with Prefect's settings and the
local server's auth string among them (and workers on other machines cannot reach a loopback
server anyway). A worker sees a batch's calls (the questions and answers it sends), its
judges' settings (URLs, models, the names of key variables, never a key) and the work dir.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import Counter
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from prefect import get_run_logger

from tasks.errors import InputError
from tasks.judging.batches import journal_reserve
from tasks.judging.dask_batches import DASK_ADDRESS_ENV, remote_batches, run_remote_batch
from tasks.judging.planned import PlannedCall
from tasks.judging.request import JudgeRequest, RemoteSender
from tasks.judging.stopping import StopRequest
from tasks.judging.tally import Tally
from tasks.judging.writer import CacheWriter

if TYPE_CHECKING:
    from prefect.task_runners import TaskRunner

__all__ = ["CONNECT_TIMEOUT_S", "dask_sender"]

CONNECT_TIMEOUT_S = 15
"""How long to wait for the scheduler before the run fails with a clear error."""


def _flow_dask_runner() -> TaskRunner[Any] | None:
    """The current flow's task runner if it is a DaskTaskRunner (checked without importing
    prefect_dask: a flow can only use one if its module is loaded)."""
    import sys

    from prefect.context import FlowRunContext

    module = sys.modules.get("prefect_dask.task_runners")
    ctx = FlowRunContext.get()
    if module is None or ctx is None or ctx.task_runner is None:
        return None
    runner = ctx.task_runner
    return runner if isinstance(runner, module.DaskTaskRunner) else None


def dask_sender(request: JudgeRequest) -> RemoteSender | None:
    """A batch sender for `tasks.judging.stage.run_judge_stage` that runs batches on Dask,
    or None.

    Dask is used if the request's `dask_address` (or $JUDGELINE_DASK_ADDRESS) names a
    scheduler, or the running flow was given a `DaskTaskRunner`; otherwise batches stay in
    the flow's loop.
    """
    address = request.dask_address or os.environ.get(DASK_ADDRESS_ENV) or None
    flow_runner = None if address else _flow_dask_runner()
    if address is None and flow_runner is None:
        return None

    async def send(
        request: JudgeRequest, to_send: list[PlannedCall], tally: Tally, stop: StopRequest
    ) -> list[dict[str, int]]:
        def on_dask() -> list[dict[str, Any]]:
            with ExitStack() as stack:
                runner = flow_runner or _connect(address or "", stack)
                return _run_batches(runner, request, to_send, tally)

        # Held from the start: a worker's rows handed back are journaled here even once the
        # disk is full (in the reserve's space).
        writer = CacheWriter(
            request.work, reserve_bytes=journal_reserve(request), on_full=stop.disk_full
        )
        try:
            async with writer:
                results = await asyncio.to_thread(on_dask)  # waiting on Dask blocks
                _keep_handed_back(results, writer, tally)
        finally:
            tally.lost += writer.lost
        placement = Counter(r["worker"] for r in results)
        where = address or "the flow's Dask cluster"
        get_run_logger().info(
            "run %s: %d batches on Dask at %s, by worker: %s",
            request.run_id,
            len(results),
            where,
            dict(sorted(placement.items())),
        )
        return [r["counts"] for r in results]

    return send


def _connect(address: str, stack: ExitStack) -> TaskRunner[Any]:
    """A started DaskTaskRunner connected to `address` (closed with `stack`), or an
    InputError saying why not."""
    from prefect_dask import DaskTaskRunner

    runner = stack.enter_context(
        DaskTaskRunner(address=address, client_kwargs={"timeout": CONNECT_TIMEOUT_S})
    )
    try:
        runner.client.nthreads()
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(
            f"no Dask scheduler reachable at {address!r}: {type(exc).__name__}: {exc}"
        ) from None
    return runner


def _threads(runner: TaskRunner[Any]) -> int:
    client = runner.client  # type: ignore[attr-defined]
    return max(1, sum(client.nthreads().values()))


def _keep_handed_back(results: list[dict[str, Any]], writer: CacheWriter, tally: Tally) -> None:
    """What stopped workers could not keep where the flow reads it, kept by the flow; the
    first worker's reason stops the stage (nothing is published here any more)."""
    for result in results:
        tally.published.update(result["published"])
        if result["stopped"] is None:
            continue
        writer.filled(result["stopped"])
        replies, attempts = result["handed_back"]
        for reply in replies:
            writer.add(reply, [])
        if attempts:
            writer.add(None, attempts)


def _run_batches(
    runner: TaskRunner[Any], request: JudgeRequest, to_send: list[PlannedCall], tally: Tally
) -> list[dict[str, Any]]:
    """Submit the batches, as many at once as the cluster has threads; count each as it
    finishes. Once a worker stopped (a full disk, an absent store), no batch is submitted
    any more. Raise the first failure at the end (after the others finished, so no batch is
    still writing when the flow moves on)."""
    from distributed import as_completed

    client = runner.client  # type: ignore[attr-defined]
    threads = _threads(runner)
    batches = iter(remote_batches(request, to_send, threads))
    queue = as_completed(loop=client.loop)

    def submit_next() -> None:
        batch = next(batches, None)
        if batch is not None:
            key = f"judge-batch-{batch.judge}-{batch.index}-{uuid.uuid4().hex[:8]}"
            queue.add(client.submit(run_remote_batch, batch, key=key, pure=False))

    for _ in range(threads):
        submit_next()
    results: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    for done in queue:
        try:
            result = done.result()
        except Exception as exc:  # noqa: BLE001 - re-raised below, once every batch is done
            errors.append(exc)
        else:
            tally.record_batch(result["counts"])
            tally.add_trips(result["trips"])
            tally.timed_out += result.get("timed_out", 0)
            results.append(result)
        if not any(r["stopped"] is not None for r in results):
            submit_next()
    if errors:
        raise errors[0]
    return results
