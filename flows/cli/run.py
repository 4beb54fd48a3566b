"""Subcommands for whole runs: demo, run, runs, show and report."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from flows.cli.app import app, console, prepare_prefect, state


def _run_nightly(**params: Any) -> dict[str, Any]:
    prepare_prefect()
    from flows.nightly import nightly_flow

    result: dict[str, Any] = asyncio.run(nightly_flow(**params))
    return result


def _summary_table(run_id: str) -> Table:
    """Per judge and config: score, conflicts, and per policy savings and decision changes."""
    from tasks.warehouse import query

    work = state.work
    disclosure = query(work, "report_disclosure", run_id=run_id)
    scores = query(work, "report_scores", run_id=run_id).set_index(
        ["judge", "config", "dataset", "design", "policy"]
    )
    datasets = sorted(set(disclosure.dataset))
    table = Table(
        title=f"run {run_id} · {', '.join(datasets)}",
        caption="policy columns: calls saved / decisions changed vs the full reference (balanced)",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
    )
    table.add_column("judge · config", no_wrap=True)
    if len(datasets) > 1:
        table.add_column("dataset")
    for col in ("score (95% CI)", "conflicts", "consistent"):
        table.add_column(col, justify="right", no_wrap=True)
    policies = ("nonstrict", "strict", "paired_unanimity")
    for policy in policies:
        table.add_column(policy.split("_")[0], justify="right", no_wrap=True)
    for _, d in disclosure.iterrows():
        cells = [f"{d.judge} · {d.config}"] + ([d.dataset] if len(datasets) > 1 else [])
        full = ("balanced", "full")
        key = (d.judge, d.config, d.dataset)
        if key + full in scores.index:
            r = scores.loc[key + full]  # type: ignore[index]
            cells.append(f"{r.score:.3f} ({r.ci_low:.2f}-{r.ci_high:.2f})")
        else:
            cells.append("-")
        consistent = "-" if d.consistency is None else f"{d.consistency:.0%}"
        cells += [str(d.conflicting), consistent]
        for policy in policies:
            at = key + ("balanced", policy)
            cells.append(
                f"{scores.loc[at].savings:.0%}/{scores.loc[at].p_change:.1%}"  # type: ignore[index]
                if at in scores.index
                else "-"
            )
        table.add_row(*cells)
    return table


@app.command("demo")
def demo(
    latency_ms: Annotated[
        float, typer.Option(help="Simulated think time per reply (ms); 0 is as fast as it goes.")
    ] = 0.0,
) -> None:
    """Run the nightly flow on the bundled demo benchmark against three simulated judges."""
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
    console.print(_summary_table(run_id))
    seconds = sum(record["stage_seconds"].values())
    calls = record["calls"]
    console.print(
        f"{calls.get('planned', 0)} planned calls, {calls.get('sent', 0)} sent, "
        f"{calls.get('failed', 0)} failed; stages took {seconds:.1f} s"
    )
    console.print(f"report: {record['report']}")


@app.command("run")
def run(
    config: Annotated[Path, typer.Argument(help="Run configuration (YAML).")],
    run_id: Annotated[str | None, typer.Option(help="Run id (default: new).")] = None,
) -> None:
    """Run the nightly flow once for a configuration, now."""
    from tasks.runconfig import load_run_config

    cfg = load_run_config(config)
    work_dir = str(state.work.root) if cfg.work_dir is None else cfg.work_dir
    record = _run_nightly(
        config_path=str(config), run_id=run_id, work_dir=work_dir, show_progress=True
    )
    console.print(_summary_table(record["run_id"]))
    console.print(f"report: {record['report']}")


@app.command("runs")
def runs() -> None:
    """List runs with status and counts, newest first."""
    from tasks.runrecord import list_records

    table = Table(header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("run id", "status", "started", "stored", "failed", "M", "I"):
        table.add_column(col, no_wrap=True, justify="left" if col == "run id" else "right")
    for r in list_records(state.work):
        table.add_row(
            r.run_id,
            r.status,
            r.started_at.strftime("%m-%d %H:%M"),
            f"{r.calls.get('stored', '-')}/{r.calls.get('planned', '-')}",
            str(r.calls.get("failed", "-")),
            str(r.outcomes.get("M", "-")),
            str(r.outcomes.get("I", "-")),
        )
    console.print(table)


@app.command("show")
def show(run_id: Annotated[str, typer.Argument(help="Run id.")]) -> None:
    """Print a run's summary table in the terminal."""
    from tasks.runrecord import read_record

    read_record(state.work, run_id)
    console.print(_summary_table(run_id))


@app.command("report")
def report(run_id: Annotated[str, typer.Argument(help="Run id.")]) -> None:
    """Rebuild a run's HTML report from the warehouse, without calling any judge."""
    from tasks.report.data import build_report

    console.print(f"report: {build_report(state.work, run_id)}")


@app.command("serve")
def serve(
    config: Annotated[Path, typer.Argument(help="Run configuration (YAML) for the nightly run.")],
) -> None:
    """Serve the nightly-benchmark, rerun-failed and replay-policies deployments.

    Needs a Prefect server (PREFECT_API_URL); schedules only fire against a real server.
    """
    from prefect import serve as prefect_serve

    from flows.deploy import build_deployments

    deployments = build_deployments(config, state.work.root)
    console.print(f"serving {', '.join(d.name for d in deployments)} (Ctrl-C stops)")
    prefect_serve(*deployments, print_starting_message=False)
