"""The live-stopping flow: paired unanimity executed in two waves of judge calls.

Wave 1 sends the first drawn couple (one `AB` and one `BA` reference call) of every pair to
every judge config; wave 2 sends the remaining reference calls of the pairs that did not
stop. Both waves go through the judge stage (batched, cached), and the run's tables hold
the executed calls only. See `tasks.live.draws` for the draws and `tasks.live.outcomes` for the
decision rule.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.judge import CALLS_FILE, run_judge_stage
from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.ingest.manifest import read_manifest
from tasks.judging.planned import plan_calls
from tasks.live.draws import Slot, draw_live, slots_of, wave_calls, write_draws
from tasks.live.outcomes import (
    LIVE_DESIGN,
    LIVE_POLICY,
    first_couple_stops,
    live_pairs,
    live_summary,
    write_live_tables,
)
from tasks.live.runs import record_live_info
from tasks.plan import read_plan
from tasks.remap.outcomes import RemapResult, write_remap
from tasks.templates import DEFAULT_TEMPLATE, get_template
from tasks.workdir import WorkDir


@task(name="live-remap", cache_policy=NO_CACHE)
def remap_task(work: WorkDir, run_id: str, executed: set[Slot]) -> RemapResult:
    """Gate, parse and remap the calls executed so far (and only those)."""
    from tasks.live.outcomes import remap_executed

    return remap_executed(work, run_id, executed)


def _combined_counts(calls: pa.Table, waves: list[dict[str, Any]]) -> dict[str, Any]:
    """Judge-stage counts of the whole live run: its calls table holds executed calls only."""
    status = Counter(calls.column("status").to_pylist())
    categories = Counter(c for c in calls.column("error_category").to_pylist() if c is not None)
    return {
        "planned": calls.num_rows,
        "unique_keys": len(set(calls.column("call_key").to_pylist())),
        "cached": sum(int(w["cached"]) for w in waves),
        "sent": sum(int(w["sent"]) for w in waves),
        "stored_by_other_runs": sum(int(w["stored_by_other_runs"]) for w in waves),
        "stored": status.get("stored", 0),
        "failed": status.get("failed", 0),
        "pending": status.get("pending", 0),
        "failed_by_category": dict(sorted(categories.items())),
        "send_seconds": round(sum(float(w["send_seconds"]) for w in waves), 3),
        "waves": waves,
    }


def _live_figures(summary: pa.Table, rng_seed: int, k: int) -> dict[str, Any]:
    groups = summary.to_pylist()
    realised = sum(int(g["realised_calls"]) for g in groups)
    planned = sum(int(g["planned_calls"]) for g in groups)
    return {
        "policy": LIVE_POLICY,
        "design": LIVE_DESIGN,
        "rng_seed": rng_seed,
        "k": k,
        "pairs": sum(int(g["pairs"]) for g in groups),
        "stopped_early": sum(int(g["stopped_early"]) for g in groups),
        "realised_calls": realised,
        "planned_calls": planned,
        "realised_savings": 1.0 - realised / planned if planned else 0.0,
        "groups": groups,
    }


async def run_live_stage(
    work: WorkDir,
    run_id: str,
    plan_id: str,
    judges: list[JudgeSpec],
    rng_seed: int,
    template_id: str = DEFAULT_TEMPLATE,
    batch_size: int = 500,
    *,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Run paired unanimity live over a full-grid plan; returns {"calls": ..., "live": ...}.

    Writes the run's draws, calls, labels, outcomes, dispositions and disclosure (executed
    calls only) and `live.parquet` / `live_summary.parquet`.
    """
    get_template(template_id)
    # Not gated here: the judge stage gates the plan before it sends any call.
    plan_info, presentations = read_plan(work, plan_id, gate=False)
    if plan_info.design != "full":
        raise InputError(
            f"plan {plan_id} holds a drawn {plan_info.design} design; live stopping draws its "
            "own balanced reference and needs a full-grid plan (`judgeline plan ... full`)"
        )
    _, manifest = read_manifest(work, plan_info.manifest_hash)
    k = plan_info.k
    draws = draw_live(presentations.column("pair_id").to_pylist(), k, rng_seed)
    write_draws(work, run_id, draws)
    planned = plan_calls(manifest, presentations, judges, template_id, run_id)

    async def send(calls: list[Any]) -> dict[str, Any]:
        return await run_judge_stage(
            work, run_id, plan_id, judges, template_id, batch_size,
            only_keys={c.call_key for c in calls}, show_progress=show_progress,
        )  # fmt: skip

    wave1 = wave_calls(planned, presentations, draws, first=True)
    waves = [await send(wave1)]
    executed = slots_of(wave1)
    result = remap_task(work, run_id, executed)
    stops = first_couple_stops(result.outcomes, draws)
    going_on = {group for group, stop in stops.items() if stop is None}
    wave2 = wave_calls(planned, presentations, draws, first=False, going_on=going_on)
    if wave2:
        waves.append(await send(wave2))
        executed |= slots_of(wave2)
        result = remap_task(work, run_id, executed)
    write_remap(work, result)

    pairs = live_pairs(result.outcomes, stops, k)
    summary = live_summary(pairs, k)
    write_live_tables(work, run_id, pairs, summary)
    calls = _combined_counts(pq.read_table(work.run_dir(run_id) / CALLS_FILE), waves)
    live = _live_figures(summary, rng_seed, k)
    record_live_info(work, run_id, {**live, "calls": calls})
    return {"calls": calls, "live": live}


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
    from tasks.warehouse import build_warehouse

    work = WorkDir.at(work_dir)
    result = await run_live_stage(
        work, run_id, plan_id, judges, rng_seed, template_id, batch_size,
        show_progress=show_progress,
    )  # fmt: skip
    build_warehouse(work)
    live = result["live"]
    get_run_logger().info(
        "live run %s: %d of %d reference calls (%.1f%% saved), %d of %d pairs stopped early",
        run_id, live["realised_calls"], live["planned_calls"], 100 * live["realised_savings"],
        live["stopped_early"], live["pairs"],
    )  # fmt: skip
    return result
