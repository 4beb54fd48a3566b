"""judgeline's flows (flows/flowkind.py): a flow run carries the process's run tags, its task
runs none (a tagged task run asks the server for concurrency slots first); a subflow run
started under `subflow_tags` carries them too."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from uuid import UUID

import pytest

pytestmark = pytest.mark.usefixtures("prefect_harness")

TAG = "work-dir:/somewhere/work"


def _task_run_tags(flow_run_id: UUID, expected: int) -> list[tuple[str, list[str]]]:
    """(task name, tags) of a flow run's task runs, once the server has recorded `expected`
    of them (task runs reach it as events)."""
    from prefect.client.orchestration import get_client
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
    from prefect.client.orchestration import get_client

    async def read() -> list[str]:
        async with get_client() as client:
            return list((await client.read_flow_run(flow_run_id)).tags)

    return asyncio.run(read())


def test_flow_runs_carry_the_run_tags_and_their_task_runs_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import prefect
    from prefect import task
    from prefect.context import FlowRunContext

    import flows.runtime
    from flows.flowkind import flow
    from flows.runtime import subflow_tags

    monkeypatch.setattr(flows.runtime, "RUN_TAGS", [TAG])

    @task(name="step")
    def step() -> int:
        return 1

    def this_run() -> UUID:
        context = FlowRunContext.get()
        assert context is not None and context.flow_run is not None
        return context.flow_run.id

    @flow(name="kind-child")
    async def child() -> UUID:
        step()
        return this_run()

    @flow(name="kind-parent")
    async def parent() -> dict[str, Any]:
        step()
        with subflow_tags():
            child_run = await child()
        return {"parent": this_run(), "child": child_run}

    @flow(name="kind-sync")
    def sync_flow() -> UUID:
        step()
        step()
        return this_run()

    with prefect.tags(TAG):  # as flows.runtime.tag_runs enters it for a command
        ids = asyncio.run(parent())
        sync_id = sync_flow()
    for run_id in (ids["parent"], ids["child"], sync_id):
        assert TAG in _flow_run_tags(run_id)
    # The parent's task runs: its step, and the subflow run's node in it (tagged as the
    # subflow run is).
    assert _task_run_tags(ids["parent"], 2) == [("kind-child", [TAG]), ("step", [])]
    assert _task_run_tags(ids["child"], 1) == [("step", [])]
    assert _task_run_tags(sync_id, 2) == [("step", []), ("step", [])]


def test_a_flows_options_keep_its_function() -> None:
    """`with_options` builds the flow again from its own function: not wrapped twice, and
    its version is still the hash of the function's file."""
    from flows.flowkind import flow

    def work(n: int = 1) -> int:
        return n

    first = flow(name="kind-options")(work)
    second = first.with_options(name="kind-options-2")
    assert second.version == first.version and first.version is not None
    assert second.fn(n=3) == 3
    assert getattr(second.fn, "__wrapped__", None) is work
