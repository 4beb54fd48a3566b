"""Subcommands judge and rerun-failed: the judge-call jobs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flows.cli.app import (
    DaskAddress,
    app,
    console,
    load_judges,
    prepare_prefect,
    print_reasons,
    print_rows,
    run_id_given,
    state,
)
from tasks.errors import InputError

if TYPE_CHECKING:
    from schemas.judge import JudgeSpec


def _quick_judge(
    base_url: str, model: str, provider: str, api_key_env: str | None, simulated: bool
) -> JudgeSpec:
    from pydantic import ValidationError

    from schemas.judge import JudgeSpec

    try:
        return JudgeSpec.model_validate(
            {
                "name": model,
                "provider": provider,
                "base_url": base_url,
                "model": model,
                "api_key_env": api_key_env,
                "simulated": simulated,
            }
        )
    except ValidationError as exc:
        raise InputError(f"bad quick judge: {exc.errors()[0]['msg']}") from None


def _print_counts(run_id: str, counts: dict[str, Any]) -> None:
    now = counts.get("sent_now", counts["sent"])
    before = f" ({counts['sent']} by this run in all)" if now != counts["sent"] else ""
    console.print(
        f"run [bold]{run_id}[/bold]: {counts['planned']} planned calls "
        f"({counts['unique_keys']} distinct, {counts['cached']} cached), sent {now}{before} in "
        f"{counts['send_seconds']} s; stored {counts['stored']}, failed {counts['failed']}, "
        f"pending {counts['pending']}",
        highlight=False,
    )
    if counts["stored_by_other_runs"]:
        console.print(
            f"{counts['stored_by_other_runs']} calls were stored by another run sharing the "
            "cache while they waited, and not sent",
            highlight=False,
        )
    if counts["failed_by_category"]:
        parts = ", ".join(f"{k} {v}" for k, v in counts["failed_by_category"].items())
        console.print(
            f"failed by category: {parts}; `judgeline rerun-failed {run_id}` sends them again",
            highlight=False,
        )
    if counts.get("timed_out"):
        console.print(
            f"{counts['timed_out']} requests timed out (a provider may still bill a request "
            "the client gave up on; each call retries a timeout once at most)",
            highlight=False,
        )


@app.command("judge")
def judge(
    plan_id: Annotated[str, typer.Argument(help="Plan id (or a unique prefix of one).")],
    judges_file: Annotated[
        Path | None, typer.Option("--judges", help="YAML file with a `judges:` list.")
    ] = None,
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
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Quick judge: API root, e.g. .../v1.")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Quick judge: model.")] = None,
    provider: Annotated[str, typer.Option("--provider", help="Quick judge: provider.")] = "openai",
    api_key_env: Annotated[
        str | None, typer.Option("--api-key-env", help="Quick judge: env var with the key.")
    ] = None,
    simulated: Annotated[
        bool,
        typer.Option(
            "--simulated",
            help="Quick judge: --base-url is `judgeline serve-judge` (requests carry their "
            "call key).",
        ),
    ] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    dask_address: DaskAddress = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print calls, tokens and USD; send nothing.")
    ] = False,
) -> None:
    """Send every planned call of a plan to the judges (cached calls are never resent)."""
    from tasks.hashing import digest
    from tasks.plan import resolve_plan_id
    from tasks.prompts.templates import DEFAULT_TEMPLATE

    judges: list[JudgeSpec] = []
    if judges_file is not None:
        judges.extend(load_judges(judges_file))
    if base_url or model:
        if not (base_url and model):
            raise InputError("a quick judge needs both --base-url and --model")
        judges.append(_quick_judge(base_url, model, provider, api_key_env, simulated))
    if not judges:
        raise InputError("no judges: give --judges FILE.yaml or --base-url URL --model M")
    plan = resolve_plan_id(state.work, plan_id)
    template_id = template or DEFAULT_TEMPLATE
    from flows.cli.estimate import warn
    from tasks.prompts.preflight import judge_warnings

    if dry_run:
        from tasks.judging.estimate import ESTIMATE_NOTE, estimate_plan
        from tasks.runs.preflight import unset_key_variables

        rows = estimate_plan(state.work, plan, judges, template_id)
        print_rows(f"estimate · plan {plan}", rows, ESTIMATE_NOTE)
        warn(unset_key_variables(judges, dask_address) + judge_warnings(judges))
        return
    warn(judge_warnings(judges))
    specs = [j.model_dump(mode="json") for j in judges]
    if run_id is None:
        run_id = f"run-{digest(plan, template_id, specs)[:16]}"
    _judge_run(run_id, plan, judges, template_id, batch_size, progress, dask_address)


def _judge_run(
    run_id: str,
    plan: str,
    judges: list[JudgeSpec],
    template_id: str,
    batch_size: int,
    progress: bool,
    dask_address: str | None,
) -> None:
    """The judge flow for one run, with its record (so `runs`, `show` and `report` know it)."""
    prepare_prefect("flows.stageflows")
    from flows.stageflows import judge_flow
    from tasks.runs.health import EXIT_CODES, reasons
    from tasks.runs.jobs import judged_config, new_record, recorded_run, settle_status

    specs = [j.model_dump(mode="json") for j in judges]
    record = new_record(run_id, "judge", judged_config(plan, template_id, specs))
    record.plan_id = plan
    with recorded_run(state.work, record):
        record.calls = counts = asyncio.run(
            judge_flow(
                run_id=run_id,
                plan_id=plan,
                judges=judges,
                template_id=template_id,
                batch_size=batch_size,
                work_dir=state.work.address,
                show_progress=progress,
                dask_address=dask_address,
            )
        )
        settle_status(state.work, record)
    _print_counts(run_id, counts)
    if record.status != "completed":
        # As `run` exits: 3 degraded, 4 failed (no call of the plan stored), with the reasons.
        print_reasons(reasons(run_id, record.status, record.health))
        raise typer.Exit(EXIT_CODES[record.status])


@app.command("rerun-failed")
def rerun_failed(
    run_id: Annotated[
        str,
        typer.Argument(help="The run whose unstored calls to send again.", callback=run_id_given),
    ],
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    dask_address: DaskAddress = None,
) -> None:
    """Send again exactly the planned calls of a run that have no stored reply, then rebuild
    its outcomes, replay, record, status and report; exits as `run` does (3 if the run is
    still degraded, 4 if failed). Also takes up a run interrupted at any stage (Ctrl-C,
    SIGTERM, a killed process): its job runs again under its run id, reusing every reply
    stored."""
    from schemas.judge import JudgeSpec
    from tasks.runs.folder import RunFolder
    from tasks.runs.health import EXIT_CODES, RunNotCompleted
    from tasks.runs.jobs import resume_kind

    kind, record = resume_kind(state.work, run_id)
    config: dict[str, Any] = record.config if record is not None else {}
    if kind == "import":
        files = " ".join(str(f) for f in config.get("files", []))
        raise InputError(
            f"run {run_id} is an import that did not finish (nothing is sent by an import); "
            f"import the files again: judgeline import {config['import']} {files} "
            f"--run-id {run_id}"
        )
    judges = [JudgeSpec.model_validate(j) for j in config.get("judges", [])]
    if kind == "nightly":
        from flows.cli.app import run_and_show_nightly

        run_and_show_nightly(config=config, run_id=run_id, work_dir=state.work.address,
                             show_progress=progress)  # fmt: skip
        return
    if kind == "judge":
        template_id = str(config.get("template") or "")
        _judge_run(run_id, str(config["plan_id"]), judges, template_id, 500, progress,
                   dask_address)  # fmt: skip
        return
    if kind == "live":
        from flows.cli.live import live_run

        live_run(run_id, str(config["plan_id"]), judges, int(config["live"]["rng_seed"]),
                 str(config.get("template") or ""), 500, progress)  # fmt: skip
        return
    prepare_prefect("flows.nightly")
    from flows.nightly import rerun_run_flow

    try:
        counts = asyncio.run(
            rerun_run_flow(
                run_id=run_id,
                work_dir=state.work.address,
                show_progress=progress,
                dask_address=dask_address,
            )
        )
    except RunNotCompleted as exc:
        print_reasons(exc.lines)
        raise typer.Exit(EXIT_CODES[exc.status]) from None
    _print_counts(run_id, counts)
    where = state.work.location(RunFolder(state.work, run_id).report)
    console.print(f"report: {where}", highlight=False)
