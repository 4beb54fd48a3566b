"""Subcommand live: run paired unanimity live over a full-grid plan (two waves of calls)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flows.cli.app import app, console, load_judges, prepare_prefect, run_id_given, state
from tasks.runs.folder import RunFolder

if TYPE_CHECKING:
    from schemas.judge import JudgeSpec


def _expected_savings(run_id: str) -> tuple[str | None, dict[tuple[str, str, str], float]]:
    """(reference run, savings per group) of the replay's balanced paired unanimity."""
    import pyarrow.parquet as pq

    from tasks.live.outcomes import LIVE_DESIGN, LIVE_POLICY
    from tasks.live.runs import find_reference_run

    reference = find_reference_run(state.work, run_id)
    if reference is None:
        return None, {}
    rows = pq.read_table(RunFolder(state.work, reference).summary).to_pylist()
    return reference, {
        (r["judge"], r["config"], r["dataset"]): float(r["savings"])
        for r in rows
        if (r["design"], r["policy"]) == (LIVE_DESIGN, LIVE_POLICY)
    }


@app.command("live")
def live(
    plan_id: Annotated[str, typer.Argument(help="A full-grid plan id (or a unique prefix).")],
    judges_file: Annotated[Path, typer.Option("--judges", help="YAML file with judges.")],
    rng_seed: Annotated[int, typer.Option("--rng-seed", min=0, help="Seed of the draws.")] = 0,
    template: Annotated[str | None, typer.Option("--template", help="Template id.")] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            help="Run id; derived from the inputs if omitted.",
            callback=run_id_given,
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Calls per task.")] = 500,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Run paired unanimity live: the first drawn couple of every pair, then the rest of the
    reference unless it stopped (docs/design.md#live-stopping). Draws are recorded, reproducible."""
    from tasks.hashing import digest
    from tasks.plan import resolve_plan_id
    from tasks.prompts.templates import DEFAULT_TEMPLATE

    judges = load_judges(judges_file)
    plan = resolve_plan_id(state.work, plan_id)
    template_id = template or DEFAULT_TEMPLATE
    specs = [j.model_dump(mode="json") for j in judges]
    if run_id is None:
        run_id = f"live-{digest(plan, template_id, specs, rng_seed)[:16]}"
    live_run(run_id, plan, judges, rng_seed, template_id, batch_size, progress)


def live_run(
    run_id: str,
    plan: str,
    judges: list[JudgeSpec],
    rng_seed: int,
    template_id: str,
    batch_size: int,
    progress: bool,
) -> None:
    """The live flow for one run, with its record, then its table of realised savings."""
    from rich.table import Table

    from tasks.runs.jobs import judged_config, new_record, recorded_run
    from tasks.runs.record import outcome_counts

    prepare_prefect("flows.live")
    from flows.live import live_flow

    specs = [j.model_dump(mode="json") for j in judges]
    config = judged_config(plan, template_id, specs, live={"rng_seed": rng_seed})
    record = new_record(run_id, "live", config)
    record.plan_id = plan
    with recorded_run(state.work, record):  # so `runs`, `show` and `report` know the run
        result: dict[str, Any] = asyncio.run(
            live_flow(
                run_id,
                plan,
                judges,
                rng_seed,
                template_id,
                batch_size,
                state.work.address,
                progress,
            )  # fmt: skip
        )
        record.calls, record.live = result["calls"], result["live"]
        record.outcomes = outcome_counts(RunFolder(state.work, run_id))
    reference, expected = _expected_savings(run_id)
    table = Table(
        title=f"live run {run_id} · paired unanimity · rng seed {rng_seed}",
        caption=f"expected savings: replay of run {reference}"
        if reference
        else "expected savings: no full-grid run of this plan, template and judges yet",
        header_style="bold",
    )
    for col in ("judge · config", "dataset", "pairs", "stopped early", "calls", "saved"):
        table.add_column(col, justify="left" if col in ("judge · config", "dataset") else "right")
    table.add_column("expected", justify="right")
    for g in result["live"]["groups"]:
        saved = expected.get((g["judge"], g["config"], g["dataset"]))
        table.add_row(
            f"{g['judge']} · {g['config']}",
            g["dataset"],
            str(g["pairs"]),
            str(g["stopped_early"]),
            f"{g['realised_calls']} of {g['planned_calls']}",
            f"{g['realised_savings']:.1%}",
            "-" if saved is None else f"{saved:.1%}",
        )
    console.print(table)
    calls = result["calls"]
    console.print(
        f"sent {calls.get('sent_now', calls['sent'])} calls ({calls['failed']} failed); draws, "
        "outcomes and live "
        f"tables in {RunFolder(state.work, run_id).path}",
        highlight=False,
        soft_wrap=True,
    )
