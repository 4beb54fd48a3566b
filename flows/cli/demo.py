"""Subcommand demo: the whole pipeline on the bundled demo benchmark against simulated judges,
for one night or several (a growing benchmark, a drifting judge, a probe that catches it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.markup import escape

from flows.cli.app import (
    app,
    console,
    prepare_prefect,
    print_reasons,
    print_spend,
    print_summary,
    run_nightly,
    state,
)
from flows.cli.history import print_diff
from tasks.store.workdir import default_address


@contextmanager
def demo_resumes() -> Iterator[None]:
    """An interrupted demo is resumed by the demo again (its simulated judge is gone with it):
    a new run that reuses every reply stored and sends the rest."""
    from tasks.errors import Interrupted

    try:
        yield
    except Interrupted as exc:
        where = (
            "" if state.work.address == default_address() else f" --work-dir {state.work.address}"
        )
        exc.resume = f"judgeline{where} demo (a new run: it reuses the {exc.run_id} replies)"
        raise


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
        demo_nights(nights, pairs, latency_ms)
        return
    prepare_prefect("flows.nightly")
    from simjudge.demo import DEMO_CACHE_MIN_TOKENS, DEMO_PERSONAS, demo_config
    from simjudge.server import simjudge_subprocess
    from tasks.ingest.sources import freeze_sources
    from tasks.runs.health import EXIT_CODES, RunNotCompleted
    from tasks.runs.record import read_record

    work = state.work
    console.print(f"[bold]judgeline demo[/bold]: work dir {work.address}")
    # The simulated judge learns the key from the frozen manifest, so freeze first (the
    # nightly flow's own freeze then finds it already frozen).
    manifest_hash = freeze_sources([{"kind": "demo"}], work).info.manifest_hash
    console.print(f"manifest {manifest_hash[:16]} frozen; starting the simulated judge")
    os.environ["JUDGELINE_WORK_DIR"] = work.address
    args = ["--manifest", manifest_hash, "--latency-ms", str(latency_ms)]
    args += ["--cache-min-tokens", str(DEMO_CACHE_MIN_TOKENS)]
    for persona in DEMO_PERSONAS:
        args += ["--persona", persona]
    with simjudge_subprocess(*args) as base_url, demo_resumes():
        console.print(f"simulated judge at {base_url} with personas {', '.join(DEMO_PERSONAS)}")
        config = demo_config(base_url)
        try:
            record = run_nightly(
                config=config.model_dump(mode="json"), work_dir=work.address, show_progress=True
            )
        except RunNotCompleted as exc:
            # As `run` does: the reasons first, then what the run did measure.
            print_reasons(exc.lines)
            print_summary(exc.run_id)
            report = read_record(work, exc.run_id).report
            console.print(f"report: {report}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_CODES[exc.status]) from None
    run_id = record["run_id"]
    print_summary(run_id)
    print_spend(run_id)
    seconds = sum(record["stage_seconds"].values())
    calls = record["calls"]
    console.print(
        f"{calls.get('planned', 0)} planned calls, {calls.get('sent', 0)} sent, "
        f"{calls.get('failed', 0)} failed; stages took {seconds:.1f} s"
    )
    console.print(f"report: {record['report']}", highlight=False, soft_wrap=True)


def demo_nights(nights: int, pairs: int | None, latency_ms: float) -> None:
    """`demo --nights N`: each night frozen, judged and probed with its own simulated judge
    (restarted with the night's personas) and probe date; a degraded night does not stop the
    demo. Then the diff of the last two nights and the trends page."""
    import datetime as dt

    prepare_prefect("flows.nightly")
    from simjudge.demo import DEMO_CACHE_MIN_TOKENS
    from simjudge.demo_nights import (
        night_dataset,
        night_lines,
        nights_config,
        plan_nights,
        probe_date,
        write_night_files,
    )
    from simjudge.server import simjudge_subprocess
    from tasks.history.diff import diff_runs
    from tasks.history.page import write_trends
    from tasks.history.trends import trend_points
    from tasks.ingest.demo_benchmark import demo_pairs
    from tasks.ingest.sources import freeze_sources
    from tasks.runs.health import RunNotCompleted
    from tasks.runs.record import read_record

    work = state.work
    plan = plan_nights(nights, pairs or len(demo_pairs()), dt.datetime.now(dt.UTC).date())
    console.print(f"[bold]judgeline demo[/bold]: {nights} nights, work dir {work.address}")
    os.environ["JUDGELINE_WORK_DIR"] = work.address
    run_ids = []
    for night in plan:
        console.print(escape(night.title(nights)), style="bold", highlight=False)
        table, personas = write_night_files(work, night)
        source = night_dataset(table).model_dump()
        manifest_hash = freeze_sources([source], work).info.manifest_hash
        args = ["--manifest", manifest_hash, "--latency-ms", str(latency_ms)]
        args += ["--cache-min-tokens", str(DEMO_CACHE_MIN_TOKENS)]
        with (
            probe_date(night.date),
            simjudge_subprocess(*args, "--personas", str(personas)) as base_url,
            demo_resumes(),
        ):
            config = nights_config(base_url, table).model_dump(mode="json")
            try:
                record = run_nightly(config=config, work_dir=work.address, show_progress=True)
                run_ids.append(record["run_id"])
            except RunNotCompleted as exc:
                print_reasons(exc.lines)
                run_ids.append(exc.run_id)
        for line in night_lines(read_record(work, run_ids[-1])):
            console.print(escape(line), highlight=False, soft_wrap=True)
    print_summary(run_ids[-1])
    if len(run_ids) > 1:
        print_diff(diff_runs(work, run_ids[-2], run_ids[-1]))
    path = write_trends(work, trend_points(work))
    console.print(f"trends: {work.location(path)}", highlight=False, soft_wrap=True)
    console.print(f"report: {read_record(work, run_ids[-1]).report}", highlight=False,
                  soft_wrap=True)  # fmt: skip
