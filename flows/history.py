"""The nightly run's look back: the drift probe, and alarms raised as Prefect events."""

from __future__ import annotations

from typing import Any

from prefect import runtime, task
from prefect.cache_policies import NO_CACHE
from prefect.events import emit_event

from flows.judge import HOOKS
from schemas.config import RunConfig
from schemas.run import RunRecord
from tasks.history.alarms import ALARM_EVENT, check_alarms
from tasks.history.diff import diff_views
from tasks.history.previous import comparable, previous_view
from tasks.history.probe import run_probe
from tasks.history.view import read_run_view
from tasks.store.workdir import WorkDir


@task(name="drift-probe", cache_policy=NO_CACHE)
async def probe_task(
    work_dir: str, run_id: str, manifest_hash: str, config: dict[str, Any]
) -> dict[str, Any]:
    """Judge the probe sample afresh (tasks.history.probe) and compare with the last probe."""
    cfg = RunConfig.model_validate(config)
    return await run_probe(WorkDir.at(work_dir), run_id, manifest_hash, cfg, hooks=HOOKS)


_PENDING: dict[str, list[tuple[RunRecord, dict[str, Any]]]] = {}
"""Alarms of flow runs in this process, emitted once the flow run has its final state."""


@task(name="check-alarms", cache_policy=NO_CACHE)
def alarms_task(work_dir: str, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Check the configuration's thresholds against the previous run of its configuration and
    return the crossed ones; `emit_alarms` sends each as a `judgeline.alarm` event once the
    flow run has ended (so an automation acting on the flow run comes after its final state)."""
    work = WorkDir.at(work_dir)
    run = RunRecord.model_validate(record)
    cfg = RunConfig.model_validate(run.config)
    if cfg.alarms is None:
        return []
    measured = run.status in ("completed", "degraded") and comparable(work, run)
    view = read_run_view(work, run.run_id) if measured else None
    before = None if view is None else previous_view(work, run)
    diff = None if view is None or before is None else diff_views(before, view)
    alarms = check_alarms(cfg.alarms, run, view, diff, run.probe)
    if runtime.flow_run.id is not None:
        _PENDING.setdefault(str(runtime.flow_run.id), []).extend((run, a) for a in alarms)
    return alarms


def emit_alarms(flow: Any, flow_run: Any, state: Any) -> None:
    """A flow's completion and failure hook: emit the alarms its run recorded, one event each,
    the flow run as a related resource."""
    related = [{"prefect.resource.id": f"prefect.flow-run.{flow_run.id}",
                "prefect.resource.role": "flow-run"}]  # fmt: skip
    for run, alarm in _PENDING.pop(str(flow_run.id), []):
        emit_event(
            event=ALARM_EVENT,
            resource={"prefect.resource.id": f"judgeline.run.{run.run_id}",
                      "prefect.resource.name": run.name, "judgeline.alarm": str(alarm["alarm"])},
            related=related,
            payload=alarm,
        )  # fmt: skip
