"""Subcommands for whole runs: demo, run, runs, show and report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from flows.cli.app import (
    app,
    console,
    err_console,
    prepare_prefect,
    print_agreement,
    print_reasons,
    print_spend,
    print_summary,
    resume_line,
    run_and_show_nightly,
    run_id_given,
    show_json,
    state,
)
from flows.cli.tables import print_json, print_table
from tasks.store.workdir import open_work_dir


@app.command("run")
def run(
    config: Annotated[Path, typer.Argument(help="Run configuration (YAML).")],
    run_id: Annotated[
        str | None, typer.Option(help="Run id (default: new).", callback=run_id_given)
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the estimate (`estimate`); send nothing.")
    ] = False,
) -> None:
    """Run the nightly flow once for a configuration, now."""
    from flows.cli.estimate import warn
    from tasks.prompts.preflight import judge_warnings
    from tasks.runs.config import choose_work_dir, load_run_config
    from tasks.runs.preflight import check_run

    if dry_run:
        from flows.cli.estimate import print_estimate

        print_estimate(config)
        return
    cfg = load_run_config(config)
    work_dir, note = choose_work_dir(cfg, state.work_given)
    if note:
        err_console.print(f"note: {note}", highlight=False, soft_wrap=True)
    state.work = open_work_dir(work_dir)
    check_run(cfg, state.work, run_id)  # in a second, before Prefect starts
    warn(judge_warnings(cfg.judges))
    run_and_show_nightly(
        config_path=str(config), run_id=run_id, work_dir=state.work.address, show_progress=True
    )


JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the same data as JSON (for scripts).")
]


def _runs_json(entries: list[Any]) -> list[dict[str, Any]]:
    out = []
    for entry in entries:
        r = entry.record
        out.append(
            {
                "run_id": entry.run_id,
                "status": entry.status,
                "problem": entry.problem,
                "resume": resume_line(entry.run_id) if entry.status == "interrupted" else None,
                **(
                    {}
                    if r is None
                    else {
                        "name": r.name,
                        "started_at": r.started_at,
                        "imported": r.imported,
                        "calls": r.calls,
                        "outcomes": r.outcomes,
                    }
                ),
            }
        )
    return out


@app.command("runs")
def runs(as_json: JsonOption = False) -> None:
    """List runs with status and counts, newest first; damaged records are named, and a run
    whose process died is `interrupted`, with the command that takes it up again."""
    from tasks.runs.jobs import scan_records

    entries = scan_records(state.work)
    if as_json:
        print_json(_runs_json(entries))
        return
    headers = ("run id", "name", "status", "started", "stored", "failed", "M", "I")
    rows = []
    for entry in entries:
        r = entry.record
        if r is None:
            # A foreign folder's name may hold anything (a tab, a newline): shown quoted.
            shown = repr(entry.run_id) if entry.status == "foreign" else entry.run_id
            rows.append((shown, "-", entry.status, *("-" * 5)))
            continue
        rows.append(
            (
                r.run_id,
                r.name,
                entry.status + (" · imported" if r.imported else ""),
                r.started_at.strftime("%m-%d %H:%M"),
                f"{r.calls.get('stored', '-')}/{r.calls.get('planned', '-')}",
                str(r.calls.get("failed", "-")),
                str(r.outcomes.get("M", "-")),
                str(r.outcomes.get("I", "-")),
            )
        )
    # Run ids are copied into other commands: never cut (a block per run where the table
    # does not fit; runs are many, so the table is not turned).
    print_table(console, None, headers, rows, left=2, turn=False)
    for entry in entries:
        if entry.problem is not None:
            err_console.print(f"warning: {entry.problem}", highlight=False, soft_wrap=True)
        elif entry.status == "interrupted":
            console.print(
                f"run {entry.run_id} was interrupted (stopped by a signal, or its process "
                f"died); `{resume_line(entry.run_id)}` takes it up again",
                highlight=False,
                soft_wrap=True,
            )


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="Run id.", callback=run_id_given)],
    pair: Annotated[
        str | None, typer.Option(help="Print this pair's question, answers and both replies.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Print a run's summary table, after why it is degraded or failed (a run a stage error
    stopped: why); or, with --pair, one pair as the report's disagreements section shows it."""
    from tasks.errors import InputError
    from tasks.report.pairs import pair_text, pair_views
    from tasks.runs.health import reasons
    from tasks.runs.jobs import lock_is_free
    from tasks.runs.record import read_record
    from tasks.warehouse import check_run_tables

    record = read_record(state.work, run_id)
    if pair is not None:
        for view in pair_views(state.work, run_id, pair):
            console.print(pair_text(view), markup=False, highlight=False, soft_wrap=True)
        return
    if as_json:
        print_json(show_json(run_id, record))
        return
    started = record.started_at.strftime("%Y-%m-%d %H:%M UTC")
    if record.status == "interrupted" or (
        record.status == "running" and lock_is_free(state.work, run_id)
    ):
        why = record.error or "its process died"
        console.print(
            f"run {escape(run_id)} ({escape(record.name)}, started {started}) was interrupted: "
            f"{escape(why)}; `{escape(resume_line(run_id))}` takes it up again",
            highlight=False,
            soft_wrap=True,
        )
        return
    if record.status == "failed" and record.error:
        done = ", ".join(record.stage_seconds) or "none"
        raise InputError(
            f"run {run_id!r} ({record.name}, started {started}) failed: {record.error}; "
            f"stages done: {done}. `judgeline failures {run_id}` lists failed calls"
        )
    if record.status in ("degraded", "failed"):
        print_reasons(reasons(run_id, record.status, record.health))
    elif record.status != "completed":
        console.print(
            f"run {escape(run_id)} ({escape(record.name)}) is {record.status} since {started}; "
            "its summary is shown once it completes",
            highlight=False,
        )
        return
    check_run_tables(state.work, run_id)
    print_summary(run_id)
    print_agreement(run_id)
    print_spend(run_id)


@app.command("report")
def report(run_id: Annotated[str, typer.Argument(help="Run id.", callback=run_id_given)]) -> None:
    """Rebuild a run's HTML report from the warehouse, without calling any judge."""
    from tasks.report.data import build_report

    where = state.work.location(build_report(state.work, run_id))
    console.print(f"report: {where}", highlight=False, soft_wrap=True)


@app.command("serve")
def serve(
    config: Annotated[Path, typer.Argument(help="Run configuration (YAML) for the nightly run.")],
) -> None:
    """Serve the nightly-benchmark, rerun-failed and replay-policies deployments.

    On the server PREFECT_API_URL names, else on your local Prefect server (which
    stays up while it serves); schedules fire there.
    """
    from flows.runtime import prefect_home, private_temp
    from tasks.runs.config import choose_work_dir, load_run_config

    work_dir, note = choose_work_dir(load_run_config(config), state.work_given)
    if note:
        err_console.print(f"note: {note}", highlight=False, soft_wrap=True)
    state.work = open_work_dir(work_dir)
    private_temp(prefect_home(state.work))
    prepare_prefect("flows.deploy", records=False)
    import asyncio

    from flows.deploy import build_deployments
    from flows.serving import pooled_namesakes, serve_deployments
    from tasks.errors import InputError

    deployments = build_deployments(config, state.work.address)
    clashes = asyncio.run(pooled_namesakes(deployments))
    if clashes:
        raise InputError(
            f"the Prefect server already has {', '.join(clashes)}, which `prefect deploy` "
            "registered on a work pool; serving would replace it under the same name. Delete "
            "it (`prefect deployment delete FLOW/NAME`) and deploy deployments/prefect.yaml "
            "again, whose deployments are named `...-process` and `...-docker`, or serve on "
            "another server (PREFECT_API_URL)"
        )
    console.print(f"serving {', '.join(d.name for d in deployments)} (Ctrl-C stops)")
    serve_deployments(deployments)
