"""The live-stopping stage: paired unanimity executed in two waves of judge calls.

Wave 1 sends the first drawn couple (one `AB` and one `BA` reference call) of every pair to
every judge config; wave 2 sends the remaining reference calls of the pairs that did not
stop. Both waves go through the judge stage (batched, cached), and the run's tables hold
the executed calls only. See `tasks.live.draws` for the draws and `tasks.live.outcomes`
for the decision rule.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tasks.errors import InputError
from tasks.ingest.manifest import read_manifest
from tasks.judging.planned import PlannedCall, plan_calls
from tasks.judging.request import JudgeRequest, StageHooks
from tasks.judging.stage import call_status_counts, run_judge_stage
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
from tasks.prompts.templates import get_template
from tasks.remap.outcomes import RemapResult, write_remap
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

__all__ = ["LiveRequest", "Remapper", "run_live_stage"]

Remapper = Callable[[WorkDir, str, set[Slot]], RemapResult]
"""Gates, parses and remaps the calls of a run executed so far (`remap_executed`)."""


@dataclass(frozen=True)
class LiveRequest:
    """One live run: the judge stage's request (the whole plan) and the draws' seed."""

    judge: JudgeRequest
    rng_seed: int


def _combined_counts(calls: pa.Table, waves: list[dict[str, Any]]) -> dict[str, Any]:
    """Judge-stage counts of the whole live run: its calls table holds executed calls only."""
    return {
        "planned": calls.num_rows,
        "unique_keys": len(set(calls.column("call_key").to_pylist())),
        # A wave's `sent` and `cached` are the run's own over all its stages so far.
        "cached": int(waves[-1]["cached"]),
        "sent": int(waves[-1]["sent"]),
        "sent_now": sum(int(w["sent_now"]) for w in waves),
        "stored_by_other_runs": sum(int(w["stored_by_other_runs"]) for w in waves),
        **call_status_counts(calls),
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
    request: LiveRequest,
    remap: Remapper,
    *,
    show_progress: bool = False,
    hooks: StageHooks | None = None,
) -> dict[str, Any]:
    """Run paired unanimity live over a full-grid plan; returns {"calls": ..., "live": ...}.

    Writes the run's draws, calls, labels, outcomes, dispositions and disclosure (executed
    calls only) and its live tables; `remap` remaps the calls executed after each wave, and
    each wave's batches run through `hooks` (`tasks.judging.stage.run_judge_stage`).
    """
    judge = request.judge
    get_template(judge.template_id)
    work, folder = judge.work, RunFolder(judge.work, judge.run_id)
    # Not gated here: the judge stage gates the plan before it sends any call.
    plan_info, presentations = read_plan(work, judge.plan_id, gate=False)
    if plan_info.design != "full":
        raise InputError(
            f"plan {judge.plan_id} holds a drawn {plan_info.design} design; live stopping "
            "draws its own balanced reference and needs a full-grid plan: "
            f"`judgeline plan {plan_info.manifest_hash[:16]} --design full --k {plan_info.k}`"
        )
    _, manifest = read_manifest(work, plan_info.manifest_hash)
    k = plan_info.k
    draws = draw_live(presentations.column("pair_id").to_pylist(), k, request.rng_seed)
    write_draws(work, judge.run_id, draws)
    planned = plan_calls(
        manifest, presentations, list(judge.judges), judge.template_id, judge.run_id
    )

    async def send(calls: list[PlannedCall]) -> dict[str, Any]:
        wave = dataclasses.replace(judge, only_keys=frozenset(c.call_key for c in calls))
        return await run_judge_stage(wave, show_progress=show_progress, hooks=hooks)

    wave1 = wave_calls(planned, presentations, draws, first=True)
    waves = [await send(wave1)]
    executed = slots_of(wave1)
    result = remap(work, judge.run_id, executed)
    stops = first_couple_stops(result.outcomes, draws)
    going_on = {group for group, stop in stops.items() if stop is None}
    wave2 = wave_calls(planned, presentations, draws, first=False, going_on=going_on)
    if wave2:
        waves.append(await send(wave2))
        executed |= slots_of(wave2)
        result = remap(work, judge.run_id, executed)
    write_remap(work, result)

    pairs = live_pairs(result.outcomes, stops, k)
    summary = live_summary(pairs, k)
    write_live_tables(work, judge.run_id, pairs, summary)
    calls = _combined_counts(pq.read_table(folder.calls), waves)
    live = _live_figures(summary, request.rng_seed, k)
    record_live_info(work, judge.run_id, {**live, "calls": calls})
    return {"calls": calls, "live": live}
