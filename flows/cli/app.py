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
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flows.cli import tables
from flows.runtime import configure_prefect, start_prefect
from tasks.errors import InputError
from tasks.store import SCRATCH_ENV
from tasks.store.workdir import WorkDir, check_work_dir, open_work_dir

if TYPE_CHECKING:
    from pydantic import BaseModel

    from schemas.judge import JudgeSpec
    from schemas.run import RunRecord

__all__ = [
    "DaskAddress",
    "app",
    "console",
    "err_console",
    "fits",
    "load_judges",
    "print_rows",
    "prepare_prefect",
    "print_reasons",
    "run_id_given",
    "show_json",
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
    ctx: typer.Context,
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
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        # Tables go to terminals at their width, and to files and pipes at the width of the
        # terminal the command runs in (`| less` shows what the screen would), else 80: a
        # table that does not fit is turned, never cut (flows.cli.tables).
        os.environ["COLUMNS"] = str(terminal_width())
        ctx.call_on_close(lambda: os.environ.pop("COLUMNS", None))  # for this command only
    if scratch_dir is not None:
        # Processes this command starts (a flow's workers, the simulated judge) use it too.
        os.environ[SCRATCH_ENV] = str(scratch_dir.expanduser().resolve())
    state.work = open_work_dir(work_dir)
    state.work_given = work_dir
    state.debug = debug
    configure_prefect(debug=debug)
    check_work_dir(state.work)


def terminal_width() -> int:
    """The width of the terminal on stderr or stdin, else 80."""
    for stream in (sys.stderr, sys.stdin):
        try:
            return os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            continue
    return 80


DaskAddress = Annotated[
    str | None,
    typer.Option(
        "--dask-address",
        envvar="JUDGELINE_DASK_ADDRESS",
        help="Run the batches on this Dask scheduler, e.g. tcp://10.0.0.5:8786.",
    ),
]


def run_id_given(value: str | None) -> str | None:
    """The callback of every run id argument and option: a name that is not a run id
    (`tasks.runs.folder.RUN_ID_RULE`) is refused while the command line is read, before the
    command writes or sends anything."""
    from tasks.runs.folder import check_run_id

    return None if value is None else check_run_id(value)


def fits(table: Table) -> bool:
    """Whether a table fits the terminal at its natural width (`flows.cli.tables.fits`)."""
    return tables.fits(console, table)


def prepare_prefect(*flow_modules: str, records: bool = True) -> None:
    """For the jobs that run flows, before their flows are imported: Prefect's client on
    the user's local server (one per user, any work dir), `flow_modules` imported while
    that server starts (`flows.runtime.start_prefect`), and for a job that `records` a new
    run the git commands of its record's code version started meanwhile. Everything that
    can refuse the job's input runs before this."""
    if records:
        from tasks.runs.record import start_code_version

        start_code_version()
    start_prefect(state.work, *flow_modules)


def resume_line(run_id: str) -> str:
    """The command line that resumes an interrupted run of this command's work dir."""
    from tasks.runs.jobs import resume_command

    return resume_command(run_id, state.work)


def load_judges(path: Path) -> list[JudgeSpec]:
    """Judges from a YAML file: a run configuration, a `judges:` mapping or a bare list."""
    from pydantic import ValidationError

    from schemas.judge import JudgeFile
    from tasks.errors import describe_validation
    from tasks.runs.config import read_yaml

    data = read_yaml(path, "judges file")
    if isinstance(data, list):
        data = {"judges": data}
    if not isinstance(data, dict) or "judges" not in data:
        raise InputError("expected a `judges:` list of judge specs", file=str(path))
    try:
        return list(JudgeFile.model_validate({"judges": data["judges"]}).judges)
    except ValidationError as exc:
        raise InputError(describe_validation(exc), file=str(path)) from None


def print_rows(title: str, rows: Sequence[BaseModel], caption: str | None = None) -> None:
    """Print table rows (e.g. money per judge config): one column per field, floats at
    four significant digits, None as `-`; turned where the table does not fit the terminal
    (`flows.cli.tables.print_table`), every value whole."""
    names = list(type(rows[0]).model_fields) if rows else []
    lead = [n for n in names if n in ("judge", "config")]
    rest = [n for n in names if n not in lead]

    def cell(value: Any) -> str:
        return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)

    cells = [
        [" · ".join(str(getattr(row, n)) for n in lead), *(cell(getattr(row, n)) for n in rest)]
        for row in rows
    ]
    headers = [" · ".join(lead), *(n.replace("_", " ") for n in rest)]
    tables.print_table(console, title, headers, cells, caption)


def print_reasons(lines: list[str]) -> None:
    """Why a run is degraded or failed (`tasks.runs.health.reasons`): the status in bold, then
    one line per judge config (provider messages are text, never rich markup)."""
    for i, line in enumerate(lines):
        style = "bold red" if i == 0 else "red"
        console.print(f"[{style}]{escape(line)}[/{style}]", highlight=False, soft_wrap=True)


def print_spend(run_id: str) -> None:
    """Tokens and USD the run spent per judge config (sent calls; cached ones cost nothing)."""
    from tasks.judging.spend import run_spend

    caption = "sent calls only: cached calls cost nothing; USD at the price of `price as of`"
    print_rows(f"run {run_id} · spend", run_spend(state.work, run_id), caption)


def print_agreement(run_id: str) -> None:
    """Per judge config its self-agreement (alpha and Fleiss' kappa, all calls, within an
    order, across orders), and with two configs or more each two's Cohen's kappa."""
    from schemas.report import AgreementTableRow, JudgeAgreementTableRow
    from tasks.report.agreement import judge_rows, self_rows
    from tasks.report.data import run_agreement

    tables = run_agreement(state.work, run_id)
    if tables is None or tables.self.empty:
        return
    rows = [AgreementTableRow.model_validate(r) for r in self_rows(tables.self).to_dict("records")]
    caption = (
        "self-agreement of the K x 2 calls of a pair (1 perfect, 0 chance); invalid and "
        "missing calls are missing data; 95% intervals over pairs"
    )
    print_rows(f"run {run_id} · agreement", rows, caption)
    if not tables.judges.empty:
        frame = judge_rows(tables.judges)
        pairs = [JudgeAgreementTableRow.model_validate(r) for r in frame.to_dict("records")]
        print_rows(
            f"run {run_id} · judge against judge",
            pairs,
            "decisions over all 2K calls on the pairs both judged",
        )


def print_summary(run_id: str) -> None:
    """Per judge and config: score, conflicts, and per policy savings and decision changes,
    under the run's first configured design. A table where it fits the terminal, else one
    wrapped paragraph per row (a table would cut its numbers)."""
    import pandas as pd

    from schemas.vocabulary import CORE_POLICIES
    from tasks.report.money import usd_saved
    from tasks.runs.record import read_record
    from tasks.warehouse import query, warehouse_reads

    work = state.work
    record = read_record(work, run_id)
    designs = record.config.get("designs")
    design = str(designs[0]) if isinstance(designs, list) and designs else "balanced"
    with warehouse_reads(work, runs=[run_id]):
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
    tables.print_table(console, title, headers, rows, caption)


def show_json(run_id: str, record: RunRecord) -> dict[str, Any]:
    """What `show RUN --json` prints: the run's record, why it is degraded or failed, and
    once its tables are there, its scores, per-policy summary, spend and agreement per judge
    config (numbers as numbers, an interval as estimate, lower, upper; NaN as null)."""
    from tasks.judging.spend import run_spend
    from tasks.report.agreement import judge_numbers, self_numbers
    from tasks.report.data import run_agreement
    from tasks.runs.health import reasons
    from tasks.warehouse import check_run_tables, query, warehouse_reads

    work = state.work
    out: dict[str, Any] = {"record": record.model_dump(mode="json")}
    if record.status in ("degraded", "failed"):
        out["reasons"] = reasons(run_id, record.status, record.health)
    if record.status in ("completed", "degraded") or (
        record.status == "failed" and not record.error
    ):
        check_run_tables(work, run_id)
        with warehouse_reads(work, runs=[run_id]):
            out["scores"] = query(work, "report_scores", run_id=run_id).to_dict("records")
            out["summary"] = query(work, "report_summary", run_id=run_id).to_dict("records")
        out["spend"] = [r.model_dump(mode="json") for r in run_spend(work, run_id)]
        tables = run_agreement(work, run_id)
        if tables is not None and not tables.self.empty:
            out["agreement"] = self_numbers(tables.self)
            if not tables.judges.empty:
                out["judge_agreement"] = judge_numbers(tables.judges)
    return out


def run_nightly(**params: Any) -> dict[str, Any]:
    prepare_prefect("flows.nightly")
    from flows.nightly import nightly_flow

    result: dict[str, Any] = asyncio.run(nightly_flow(**params))
    return result


def run_and_show_nightly(**params: Any) -> dict[str, Any]:
    """The nightly flow, then what `run` prints: the summary, spend and report; a degraded
    or failed run prints its reasons first and exits 3 or 4."""
    import typer

    from tasks.runs.health import EXIT_CODES, RunNotCompleted
    from tasks.runs.record import read_record

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
