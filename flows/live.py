"""The live-stopping flow: paired unanimity executed live (`tasks.live.stage`), in two
waves of judge calls remapped as they go, then the warehouse."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.judge import HOOKS
from schemas.judge import JudgeSpec
from tasks.judging.request import JudgeRequest
from tasks.live.outcomes import remap_executed
from tasks.live.stage import LiveRequest, run_live_stage
from tasks.prompts.templates import DEFAULT_TEMPLATE
from tasks.store.workdir import WorkDir
from tasks.warehouse import build_warehouse

remap_task = task(name="live-remap", cache_policy=NO_CACHE)(remap_executed)
"""Gate, parse and remap the calls executed so far (and only those)."""


@flow(name="live-stopping")
async def live_flow(
    run_id: str,
    plan_id: str,
    judges: list[JudgeSpec],
    rng_seed: int,
    template_id: str = DEFAULT_TEMPLATE,
    batch_size: int = 500,
    work_dir: str | None = None,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Execute paired unanimity live (two waves) instead of judging the full grid."""
    work = WorkDir.at(work_dir)
    judge = JudgeRequest(
        work=work,
        run_id=run_id,
        plan_id=plan_id,
        judges=tuple(judges),
        template_id=template_id,
        batch_size=batch_size,
    )
    request = LiveRequest(judge=judge, rng_seed=rng_seed)
    result = await run_live_stage(request, remap_task, show_progress=show_progress, hooks=HOOKS)
    build_warehouse(work)
    live = result["live"]
    get_run_logger().info(
        "live run %s: %d of %d reference calls (%.1f%% saved), %d of %d pairs stopped early",
        run_id, live["realised_calls"], live["planned_calls"], 100 * live["realised_savings"],
        live["stopped_early"], live["pairs"],
    )  # fmt: skip
    return result
