"""Subcommands for whole runs: demo, run, runs, show and report."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from flows.cli.app import (
    app,
    console,
    err_console,
    fits,
    print_diff,
    print_reasons,
    print_rows,
    state,
)
from tasks.workdir import WorkDir


def _print_spend(run_id: str) -> None:
    """Tokens and USD the run spent per judge config (sent calls; cached ones cost nothing)."""
    from tasks.judging.spend import run_spend

    caption = "sent calls only: cached calls cost nothing; USD at the price of `price as of`"
    print_rows(f"run {run_id} · spend", run_spend(state.work, run_id), caption)


def _run_nightly(**params: Any) -> dict[str, Any]:
    from flows.nightly import nightly_flow

    result: dict[str, Any] = asyncio.run(nightly_flow(**params))
    return result


def _print_summary(run_id: str) -> None:
    """Per judge and config: score, conflicts, and per policy savings and decision changes,
    under the run's first configured design. A table where it fits the terminal, else one
    wrapped paragraph per row (a table would cut its numbers)."""
    import pandas as pd

    from schemas.vocabulary import POLICIES
    from tasks.runrecord import read_record
    from tasks.warehouse import query

    work = state.work
    record = read_record(work, run_id)
    designs = record.config.get("designs")
    design = str(designs[0]) if isinstance(designs, list) and designs else "balanced"
    disclosure = query(work, "report_disclosure", run_id=run_id)
    scores = query(work, "report_scores", run_id=run_id).set_index(
        ["judge", "config", "dataset", "design", "policy"]
    )
    datasets = sorted(set(disclosure.dataset))
    headers = ["judge · config"] + (["dataset"] if len(datasets) > 1 else [])
    headers += ["score (95% CI)", "conflicts", "consistent"]
    configured = record.config.get("policies")
    policies = [
        str(p) for p in (configured if isinstance(configured, list) else POLICIES) if p != "full"
    ]
    headers += [policy.split("_")[0] for policy in policies]
    rows = []
    for _, d in disclosure.iterrows():
        cells = [f"{d.judge} · {d.config}"] + ([d.dataset] if len(datasets) > 1 else [])
        key = (d.judge, d.config, d.dataset)
        at = key + (design, "full")
        if at not in scores.index:
            cells.append("-")
        elif pd.isna(scores.loc[at].score):  # type: ignore[index]
            cells.append("no valid outcome")
        else:
            r = scores.loc[at]  # type: ignore[index]
            cells.append(f"{r.score:.3f} ({r.ci_low:.2f}-{r.ci_high:.2f})")
        consistent = "-" if pd.isna(d.consistency) else f"{d.consistency:.0%}"
        cells += [str(d.conflicting), consistent]
        for policy in policies:
            at = key + (design, policy)
            cells.append(
                f"{scores.loc[at].savings:.0%}/{scores.loc[at].p_change:.1%}"  # type: ignore[index]
                if at in scores.index
                else "-"
            )
        rows.append(cells)
    title = f"run {run_id} · {record.name} · {', '.join(datasets)}"
    caption = (
        f"policy columns: calls saved / decisions changed vs the full reference ({design}); "
        "- where a policy is not defined under it"
    )
    table = Table(
        title=title,
        caption=caption,
        header_style="bold",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
    )
    for i, header in enumerate(headers):
        table.add_column(header, no_wrap=True, justify="left" if i == 0 else "right")
    for cells in rows:
        table.add_row(*cells)
    if fits(table):
        console.print(table)
        return
    console.print(escape(title), style="bold", highlight=False)
    for cells in rows:
        pairs = "; ".join(f"{h} {c}" for h, c in zip(headers[1:], cells[1:], strict=True))
        console.print(f"{escape(cells[0])}: {escape(pairs)}", highlight=False)
    console.print(escape(caption), style="italic", highlight=False)


@app.command("demo")
def demo(
    latency_ms: Annotated[
        float, typer.Option(help="Simulated think time per reply (ms); 0 is as fast as it goes.")
    ] = 0.0,
    nights: Annotated[
        int,
        typer.Option(
            min=1,
            help="Simulated nights, one after the other: the benchmark grows, `strong` drifts "
            "from night 2 and a drift probe catches it; then the diff of the last two nights "
            "and the trends page.",
        ),
    ] = 1,
    pairs: Annotated[
        int | None, typer.Option(min=1, hidden=True, help="Pairs on the last night (--nights).")
    ] = None,
) -> None:
    """Run the nightly flow on the bundled demo benchmark against three simulated judges."""
    if nights > 1 or pairs is not None:
        _demo_nights(nights, pairs, latency_ms)
        return
    from flows.prepare import freeze_flow
    from tasks.demo import DEMO_PERSONAS, demo_config
    from tasks.simjudge.server import simjudge_subprocess

    work = state.work
    console.print(f"[bold]judgeline demo[/bold]: work dir {work.root}")
    # The simulated judge learns the key from the frozen manifest, so freeze first (the
    # nightly flow's own freeze then finds it already frozen).
    manifest_hash = freeze_flow([{"kind": "demo"}], str(work.root))
    console.print(f"manifest {manifest_hash[:16]} frozen; starting the simulated judge")
    os.environ["JUDGELINE_WORK_DIR"] = str(work.root)
    args = ["--manifest", manifest_hash, "--latency-ms", str(latency_ms)]
    for persona in DEMO_PERSONAS:
        args += ["--persona", persona]
    with simjudge_subprocess(*args) as base_url:
        console.print(f"simulated judge at {base_url} with personas {', '.join(DEMO_PERSONAS)}")
        config = demo_config(base_url)
        record = _run_nightly(
            config=config.model_dump(mode="json"), work_dir=str(work.root), show_progress=True
        )
    run_id = record["run_id"]
    _print_summary(run_id)
    _print_spend(run_id)
    seconds = sum(record["stage_seconds"].values())
    calls = record["calls"]
    console.print(
        f"{calls.get('planned', 0)} planned calls, {calls.get('sent', 0)} sent, "
        f"{calls.get('failed', 0)} failed; stages took {seconds:.1f} s"
    )
    console.print(f"report: {record['report']}", highlight=False, soft_wrap=True)


def _demo_nights(nights: int, pairs: int | None, latency_ms: float) -> None:
    """`demo --nights N`: each night frozen, judged and probed with its own simulated judge
    (restarted with the night's personas) and probe date; a degraded night does not stop the
    demo. Then the diff of the last two nights and the trends page."""
    import datetime as dt

    from flows.prepare import freeze_flow
    from tasks.demo_nights import (
        night_dataset,
        night_lines,
        nights_config,
        plan_nights,
        probe_date,
        write_night_files,
    )
    from tasks.history.diff import diff_runs
    from tasks.history.page import write_trends
    from tasks.history.trends import trend_points
    from tasks.ingest.demo_benchmark import demo_pairs
    from tasks.runhealth import RunNotCompleted
    from tasks.runrecord import read_record
    from tasks.simjudge.server import simjudge_subprocess

    work = state.work
    plan = plan_nights(nights, pairs or len(demo_pairs()), dt.datetime.now(dt.UTC).date())
    console.print(f"[bold]judgeline demo[/bold]: {nights} nights, work dir {work.root}")
    os.environ["JUDGELINE_WORK_DIR"] = str(work.root)
    run_ids = []
    for night in plan:
        console.print(escape(night.title(nights)), style="bold", highlight=False)
        table, personas = write_night_files(work, night)
        manifest_hash = freeze_flow([night_dataset(table).model_dump()], str(work.root))
        args = ["--manifest", manifest_hash, "--latency-ms", str(latency_ms)]
        with (
            probe_date(night.date),
            simjudge_subprocess(*args, "--personas", str(personas)) as base_url,
        ):
            config = nights_config(base_url, table).model_dump(mode="json")
            try:
                record = _run_nightly(config=config, work_dir=str(work.root), show_progress=True)
                run_ids.append(record["run_id"])
            except RunNotCompleted as exc:
                print_reasons(exc.lines)
                run_ids.append(exc.run_id)
        for line in night_lines(read_record(work, run_ids[-1])):
            console.print(escape(line), highlight=False, soft_wrap=True)
    _print_summary(run_ids[-1])
    if len(run_ids) > 1:
        print_diff(diff_runs(work, run_ids[-2], run_ids[-1]))
    path = write_trends(work, trend_points(work))
    console.print(f"trends: {path}", highlight=False, soft_wrap=True)
    console.print(f"report: {read_record(work, run_ids[-1]).report}", highlight=False,
                  soft_wrap=True)  # fmt: skip


@app.command("run")
def run(
    config: Annotated[Path, typer.Argument(help="Run configuration (YAML).")],
    run_id: Annotated[str | None, typer.Option(help="Run id (default: new).")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the estimate (`estimate`); send nothing.")
    ] = False,
) -> None:
    """Run the nightly flow once for a configuration, now."""
    from tasks.preflight import check_run
    from tasks.runconfig import choose_work_dir, load_run_config
    from tasks.runhealth import EXIT_CODES, RunNotCompleted
    from tasks.runrecord import read_record

    if dry_run:
        from tasks.judging.estimate import ESTIMATE_NOTE, estimate_config

        print_rows(f"estimate · {config}", estimate_config(config, state.work), ESTIMATE_NOTE)
        return
    cfg = load_run_config(config)
    work_dir, note = choose_work_dir(cfg, state.work_given)
    if note:
        err_console.print(f"note: {note}", highlight=False, soft_wrap=True)
    state.work = WorkDir(work_dir)
    check_run(cfg, state.work, run_id)  # in a second, before Prefect starts
    try:
        record = _run_nightly(
            config_path=str(config), run_id=run_id, work_dir=str(work_dir), show_progress=True
        )
    except RunNotCompleted as exc:
        # Degraded or failed: the reasons first, then what the run did measure.
        print_reasons(exc.lines)
        _print_summary(exc.run_id)
        report = read_record(state.work, exc.run_id).report
        console.print(f"report: {report}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_CODES[exc.status]) from None
    _print_summary(record["run_id"])
    _print_spend(record["run_id"])
    console.print(f"report: {record['report']}", highlight=False, soft_wrap=True)


@app.command("runs")
def runs() -> None:
    """List runs with status and counts, newest first; damaged records are named, and a run
    whose process died is `interrupted`, with the command that takes it up again."""
    from tasks.jobrecord import resume_command, scan_records

    entries = scan_records(state.work)
    headers = ("run id", "name", "status", "started", "stored", "failed", "M", "I")
    rows = []
    for entry in entries:
        r = entry.record
        if r is None:
            rows.append((entry.run_id, "-", entry.status, *("-" * 5)))
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
    table = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in headers:
        table.add_column(col, no_wrap=True, justify="left" if col in headers[:2] else "right")
    for row in rows:
        table.add_row(*row)
    if fits(table):
        console.print(table)
    else:
        # Run ids are copied into other commands: never cut, one paragraph per run instead.
        for row in rows:
            rest = "; ".join(f"{h} {c}" for h, c in zip(headers[2:], row[2:], strict=True))
            console.print(f"{escape(row[0])} ({escape(row[1])}): {rest}", highlight=False)
    for entry in entries:
        if entry.problem is not None:
            err_console.print(f"warning: {entry.problem}", highlight=False, soft_wrap=True)
        elif entry.status == "interrupted":
            console.print(
                f"run {entry.run_id} was interrupted (the process running it died); "
                f"`{resume_command(entry)}` takes it up again",
                highlight=False,
                soft_wrap=True,
            )


@app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    pair: Annotated[
        str | None, typer.Option(help="Print this pair's question, answers and both replies.")
    ] = None,
) -> None:
    """Print a run's summary table, after why it is degraded or failed (a run a stage error
    stopped: why); or, with --pair, one pair as the report's disagreements section shows it."""
    from tasks.errors import InputError
    from tasks.report.pairs import pair_text, pair_views
    from tasks.runhealth import reasons
    from tasks.runrecord import read_record
    from tasks.warehouse import check_run_tables

    record = read_record(state.work, run_id)
    if pair is not None:
        for view in pair_views(state.work, run_id, pair):
            console.print(pair_text(view), markup=False, highlight=False, soft_wrap=True)
        return
    check_run_tables(state.work, run_id)
    started = record.started_at.strftime("%Y-%m-%d %H:%M UTC")
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
    _print_summary(run_id)
    _print_spend(run_id)


@app.command("report")
def report(run_id: Annotated[str, typer.Argument(help="Run id.")]) -> None:
    """Rebuild a run's HTML report from the warehouse, without calling any judge."""
    from tasks.report.data import build_report

    console.print(f"report: {build_report(state.work, run_id)}", highlight=False, soft_wrap=True)


@app.command("serve")
def serve(
    config: Annotated[Path, typer.Argument(help="Run configuration (YAML) for the nightly run.")],
) -> None:
    """Serve the nightly-benchmark, rerun-failed and replay-policies deployments.

    Needs a Prefect server (PREFECT_API_URL); schedules only fire against a real server.
    """
    from prefect import serve as prefect_serve

    from flows.deploy import build_deployments
    from tasks.runconfig import choose_work_dir, load_run_config

    work_dir, note = choose_work_dir(load_run_config(config), state.work_given)
    if note:
        err_console.print(f"note: {note}", highlight=False, soft_wrap=True)
    deployments = build_deployments(config, work_dir)
    console.print(f"serving {', '.join(d.name for d in deployments)} (Ctrl-C stops)")
    prefect_serve(*deployments, print_starting_message=False)
