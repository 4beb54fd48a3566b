"""judgeline's flows (`flows.runtime.flow`): a flow run carries the work dir's tag, added by
its `on_running` hook; its task runs carry none (a tagged task run asks the server for
concurrency slots first, a request each); a subflow run carries the tag too."""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

import pytest

pytestmark = pytest.mark.usefixtures("prefect_harness")

TAG = "work-dir:/somewhere/work"


def _task_run_tags(flow_run_id: UUID, expected: int) -> list[tuple[str, list[str]]]:
    """(task name, tags) of a flow run's task runs, once the server has recorded `expected`
    of them (task runs reach it as events)."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    async def read() -> list[tuple[str, list[str]]]:
        async with get_client() as client:
            runs = await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
        # A task run's name is its task's, then "-" and a key of the run.
        return sorted((run.name.rsplit("-", 1)[0], sorted(run.tags)) for run in runs)

    deadline = time.monotonic() + 30
    while True:
        found = asyncio.run(read())
        if len(found) >= expected or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _flow_run_tags(flow_run_id: UUID) -> list[str]:
    from prefect import get_client

    async def read() -> list[str]:
        async with get_client() as client:
            return list((await client.read_flow_run(flow_run_id)).tags)

    return asyncio.run(read())


def test_flow_runs_carry_the_work_dirs_tag_and_their_task_runs_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prefect import runtime, task

    import flows.runtime
    from flows.runtime import flow

    monkeypatch.setattr(flows.runtime, "RUN_TAGS", [TAG])

    @task(name="step")
    def step() -> int:
        return 1

    def this_run() -> UUID:
        return UUID(runtime.flow_run.id)

    @flow(name="tags-child")
    async def child() -> UUID:
        step()
        return this_run()

    @flow(name="tags-parent")
    async def parent() -> dict[str, UUID]:
        step()
        return {"parent": this_run(), "child": await child()}

    @flow(name="tags-sync")
    def sync_flow() -> UUID:
        step()
        step()
        return this_run()

    ids = asyncio.run(parent())
    sync_id = sync_flow()
    for run_id in (ids["parent"], ids["child"], sync_id):
        assert TAG in _flow_run_tags(run_id)
    assert _task_run_tags(ids["parent"], 2) == [("step", []), ("tags-child", [])]
    assert _task_run_tags(ids["child"], 1) == [("step", [])]
    assert _task_run_tags(sync_id, 2) == [("step", []), ("step", [])]
    # Without a tag of this process, a flow run keeps the tags it was given.
    monkeypatch.setattr(flows.runtime, "RUN_TAGS", [])
    assert TAG not in _flow_run_tags(sync_flow())
