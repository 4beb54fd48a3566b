"""The `judgeline` Typer app, its consoles and global options, and what several groups of
subcommands share (judges files, Prefect set-up, a diff as the terminal shows it)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flows.runtime import check_work_dir, configure_prefect, open_work_dir, start_prefect
from tasks.errors import InputError
from tasks.store import SCRATCH_ENV
from tasks.workdir import WorkDir, default_address

if TYPE_CHECKING:
    from pydantic import BaseModel

    from schemas.judge import JudgeSpec
    from tasks.history.diff import RunDiff

__all__ = [
    "DaskAddress",
    "app",
    "console",
    "err_console",
    "fits",
    "load_judges",
    "print_diff",
    "print_rows",
    "prepare_prefect",
    "print_reasons",
    "state",
]

app = typer.Typer(
    name="judgeline",
    help="Pairwise LLM judging over seeds and display orders, honest about position bias.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


class State:
    """The global options of one invocation."""

    work: WorkDir = WorkDir.at()
    work_given: str | None = None
    """--work-dir or JUDGELINE_WORK_DIR when given (it beats a configuration's work_dir)."""
    debug: bool = False


state = State()


@app.callback()
def global_options(
    work_dir: Annotated[
        str | None,
        typer.Option(
            "--work-dir",
            envvar="JUDGELINE_WORK_DIR",
            help="Work directory: a path, or an object store URL (s3://bucket/prefix, gs://, "
            "az://).",
        ),
    ] = None,
    scratch_dir: Annotated[
        Path | None,
        typer.Option(
            "--scratch-dir",
            envvar=SCRATCH_ENV,
            help="This machine's copy of what it read from an object store work dir "
            "(default: the user's cache dir, ~/.cache/judgeline).",
        ),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    if not sys.stdout.isatty():
        # Tables go to terminals at their width; to files and pipes wide enough not to cut.
        os.environ.setdefault("COLUMNS", "160")
    if scratch_dir is not None:
        # Processes this command starts (a flow's workers, the simulated judge) use it too.
        os.environ[SCRATCH_ENV] = str(scratch_dir.expanduser().resolve())
    state.work = open_work_dir(work_dir)
    state.work_given = work_dir
    state.debug = debug
    configure_prefect(debug=debug)
    check_work_dir(state.work)


DaskAddress = Annotated[
    str | None,
    typer.Option(
        "--dask-address",
        envvar="JUDGELINE_DASK_ADDRESS",
        help="Run the batches on this Dask scheduler, e.g. tcp://10.0.0.5:8786.",
    ),
]


def fits(table: Table) -> bool:
    """Whether a table fits the terminal at its natural width (a narrower one would cut
    its cells to `…`: callers print one paragraph per row instead)."""
    wide = console.options.update_width(10_000)
    return console.measure(table, options=wide).maximum <= console.width


def prepare_prefect() -> None:
    """For the jobs that run flows, before their flows are imported: Prefect's home in the
    work dir and its client on the work dir's local server (`flows.runtime.start_prefect`).
    Everything that can refuse the job's input runs before this."""
    start_prefect(state.work)


def resume_line(run_id: str) -> str:
    """The command line that resumes an interrupted run (`rerun-failed`, whatever stage it
    stopped in), with the work dir it ran in unless that is the default."""
    import shlex

    from tasks.jobrecord import resume_command

    command = resume_command(run_id)
    if state.work.address != default_address():
        where = shlex.quote(state.work.address)
        command = command.replace("judgeline ", f"judgeline --work-dir {where} ", 1)
    return command


def load_judges(path: Path) -> list[JudgeSpec]:
    """Judges from a YAML file: a run configuration, a `judges:` mapping or a bare list."""
    from pydantic import ValidationError

    from schemas.judge import JudgeFile
    from tasks.runconfig import read_yaml

    data = read_yaml(path, "judges file")
    if isinstance(data, list):
        data = {"judges": data}
    if not isinstance(data, dict) or "judges" not in data:
        raise InputError("expected a `judges:` list of judge specs", file=str(path))
    try:
        return list(JudgeFile.model_validate({"judges": data["judges"]}).judges)
    except ValidationError as exc:
        problems = "; ".join(
            f"judges[{'.'.join(str(p) for p in e['loc'][1:])}]: "
            + ("unknown field" if e["type"] == "extra_forbidden" else e["msg"])
            for e in exc.errors()
        )
        raise InputError(problems, file=str(path)) from None


def print_rows(title: str, rows: Sequence[BaseModel], caption: str | None = None) -> None:
    """Print table rows (e.g. money per judge config): one column per field, floats at
    four significant digits, None as `-`."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, caption=caption, header_style="bold", box=box.SIMPLE_HEAD)
    names = list(type(rows[0]).model_fields) if rows else []
    for name in names:
        table.add_column(
            name.replace("_", " "),
            justify="left" if name in ("judge", "config") else "right",
            no_wrap=name.endswith("as_of"),
        )
    for row in rows:
        values = [getattr(row, n) for n in names]
        table.add_row(
            *("-" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v) for v in values)
        )
    console.print(table)


def print_reasons(lines: list[str]) -> None:
    """Why a run is degraded or failed (`tasks.runhealth.reasons`): the status in bold, then
    one line per judge config (provider messages are text, never rich markup)."""
    for i, line in enumerate(lines):
        style = "bold red" if i == 0 else "red"
        console.print(f"[{style}]{escape(line)}[/{style}]", highlight=False, soft_wrap=True)


FLIPS_SHOWN = 20
"""Flipped pairs listed in the terminal (all of them with --json)."""


def _pct(value: float) -> str:
    return "-" if value != value else f"{value:.1%}"  # NaN: no order conflict, no decided pair


def _signed(value: float) -> str:
    return "-" if value != value else f"{value:+.3f}"


def _calls(counts: dict[str, object]) -> str:
    return f"{counts.get('sent', 0)} sent, {counts.get('cached', 0)} reused from the cache"


def print_diff(diff: RunDiff) -> None:
    """The diff as the terminal shows it: pairs and configs, calls, one row per judge config."""
    from rich.table import Table

    say = console.print
    say(f"[bold]{diff.run_a}[/bold] -> [bold]{diff.run_b}[/bold]", highlight=False)
    say(
        f"pairs: {diff.pairs_shared} shared, {diff.pairs_added} added, "
        f"{diff.pairs_removed} removed",
        highlight=False,
    )
    for label, configs in (("added", diff.configs_added), ("removed", diff.configs_removed)):
        if configs:
            names = ", ".join(f"{j} · {c}" for j, c in configs)
            say(f"judge configs {label}: {escape(names)}", highlight=False, soft_wrap=True)
    say(f"calls before: {_calls(diff.calls_a)}; after: {_calls(diff.calls_b)}", highlight=False)
    table = Table(
        title="per judge config (before -> after)",
        caption="score and flips: over the shared pairs; consistency, left wins and valid: "
        "over each run's pairs",
    )
    for column in ("judge · config", "pairs", "score", "change (95% CI)", "consistency",
                   "left wins conflicts", "valid", "flips"):  # fmt: skip
        table.add_column(column, justify="left" if column == "judge · config" else "right")
    flips: dict[tuple[str, str], int] = {}
    for flip in diff.flips:
        flips[(flip.judge, flip.config)] = flips.get((flip.judge, flip.config), 0) + 1
    for c in diff.changes:
        table.add_row(
            escape(f"{c.judge} · {c.config}"),
            str(c.shared_pairs),
            f"{c.score_before:.3f} -> {c.score_after:.3f}"
            if c.score_before == c.score_before and c.score_after == c.score_after
            else "- (not replayed)",
            f"{_signed(c.score_change)} ({_signed(c.change_low)} to {_signed(c.change_high)})",
            f"{_pct(c.before['consistency'])} -> {_pct(c.after['consistency'])}",
            f"{_pct(c.before['left_share'])} -> {_pct(c.after['left_share'])}",
            f"{_pct(c.before['valid_share'])} -> {_pct(c.after['valid_share'])}",
            str(flips.get((c.judge, c.config), 0)),
        )
    console.print(table)
    if diff.flips:
        say(f"reference decisions that flipped ({len(diff.flips)}):", highlight=False)
        for f in diff.flips[:FLIPS_SHOWN]:
            say(
                escape(
                    f"  {f.judge} · {f.config}  {f.dataset}/{f.pair_id}: {f.before} -> {f.after}"
                ),
                highlight=False,
                soft_wrap=True,
            )
        if len(diff.flips) > FLIPS_SHOWN:
            say(f"  ... and {len(diff.flips) - FLIPS_SHOWN} more (--json lists all)")


def print_spend(run_id: str) -> None:
    """Tokens and USD the run spent per judge config (sent calls; cached ones cost nothing)."""
    from tasks.judging.spend import run_spend

    caption = "sent calls only: cached calls cost nothing; USD at the price of `price as of`"
    print_rows(f"run {run_id} · spend", run_spend(state.work, run_id), caption)


def print_summary(run_id: str) -> None:
    """Per judge and config: score, conflicts, and per policy savings and decision changes,
    under the run's first configured design. A table where it fits the terminal, else one
    wrapped paragraph per row (a table would cut its numbers)."""
    import pandas as pd

    from schemas.vocabulary import CORE_POLICIES
    from tasks.report.money import usd_saved
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
    saved = usd_saved(query(work, "report_summary", run_id=run_id))
    datasets = sorted(set(disclosure.dataset))
    headers = ["judge · config"] + (["dataset"] if len(datasets) > 1 else [])
    headers += ["score (95% CI)", "conflicts", "consistent"]
    configured = record.config.get("policies")
    policies = [
        str(p)
        for p in (configured if isinstance(configured, list) else CORE_POLICIES)
        if p != "full"
    ]
    headers += [policy.split("_")[0] for policy in policies]
    rows = []
    for _, d in disclosure.iterrows():
        cells = [f"{d.judge} · {d.config}"] + ([d.dataset] if len(datasets) > 1 else [])
        key = (d.judge, d.config, d.dataset)
        at = key + (design, "full")
        scored = at in scores.index and not pd.isna(scores.loc[at].score)  # type: ignore[index]
        if at not in scores.index:
            cells.append("-")
        elif not scored:
            cells.append("no valid outcome")
        else:
            r = scores.loc[at]  # type: ignore[index]
            cells.append(f"{r.score:.3f} ({r.ci_low:.2f}-{r.ci_high:.2f})")
        consistent = "-" if pd.isna(d.consistency) else f"{d.consistency:.0%}"
        cells += [str(d.conflicting), consistent]
        for policy in policies:
            at = key + (design, policy)
            money = f" ${saved[at]:.3g}" if at in saved else ""
            if not scored:
                cells.append("")  # nothing was measured: nothing saved, nothing changed
            elif at in scores.index:
                r = scores.loc[at]  # type: ignore[index]
                cells.append(f"{r.savings:.0%}/{r.p_change:.1%}{money}")
            else:
                cells.append("-")
        rows.append(cells)
    title = f"run {run_id} · {record.name} · {', '.join(datasets)}"
    caption = (
        f"policy columns: calls saved / decisions changed vs the full reference ({design}); "
        "- where a policy is not defined under it, empty for a config with no valid outcome"
        + ("; $: expected USD saved over the dataset's pairs" if saved else "")
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


def run_nightly(**params: Any) -> dict[str, Any]:
    prepare_prefect()
    from flows.nightly import nightly_flow

    result: dict[str, Any] = asyncio.run(nightly_flow(**params))
    return result


def run_and_show_nightly(**params: Any) -> dict[str, Any]:
    """The nightly flow, then what `run` prints: the summary, spend and report; a degraded
    or failed run prints its reasons first and exits 3 or 4."""
    import typer

    from tasks.runhealth import EXIT_CODES, RunNotCompleted
    from tasks.runrecord import read_record

    try:
        record = run_nightly(**params)
    except RunNotCompleted as exc:
        print_reasons(exc.lines)
        print_summary(exc.run_id)
        report = read_record(state.work, exc.run_id).report
        console.print(f"report: {report}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_CODES[exc.status]) from None
    print_summary(record["run_id"])
    print_spend(record["run_id"])
    console.print(f"report: {record['report']}", highlight=False, soft_wrap=True)
    return record
