"""Subcommands import and reparse: judgments made elsewhere, and re-labelling stored replies."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli.app import app, console, prepare_prefect, print_reasons, run_id_given, state


def _print_agreement(imported: dict[str, Any] | None) -> None:
    from tasks.imports import summary_lines

    if not imported or not imported.get("agreement"):
        return
    for summary in imported.get("summary") or []:
        for line in summary_lines(summary):
            console.print(line, highlight=False, soft_wrap=True)
    agree = imported["agreement"]
    if agree["disagreements"]:
        shown = min(20, len(agree["disagreements"]))
        console.print(
            f"where the parser and a file disagree ({shown} of {agree['disagree']}; the file's "
            "verdict in its own slot letters, then as a slot label):",
            highlight=False,
        )
    for d in agree["disagreements"][:20]:
        console.print(
            f"  {d['source_file']}:{d['source_line']} judgment {d['judgment']}: file says "
            f"{d['recorded_verdict']} ({d['recorded_label']}), parser {d['parsed_label']}"
            + (f" ({d['note']})" if d["note"] else ""),
            highlight=False,
            soft_wrap=True,
        )
    if imported.get("replay"):
        console.print(imported["replay"], highlight=False, soft_wrap=True)


@app.command("import")
def import_(
    fmt: Annotated[
        str, typer.Argument(help="File format: judgebench, arena-hard, fastchat, table.")
    ],
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Judgment files of one judge, one per seed (repeats); or an Arena-Hard "
            "model_judgment/<judge>/ folder: every model in one run."
        ),
    ],
    dataset: Annotated[
        str | None, typer.Option(help="Dataset name (default: from the file).")
    ] = None,
    run_id: Annotated[
        str | None, typer.Option(help="Run id (default: new).", callback=run_id_given)
    ] = None,
    name: Annotated[str | None, typer.Option(help="Benchmark name in the run record.")] = None,
    questions: Annotated[
        Path | None, typer.Option(help="fastchat: the MT-Bench question.jsonl.")
    ] = None,
    answers_dir: Annotated[
        Path | None, typer.Option(help="fastchat: the model_answer folder (<model>.jsonl).")
    ] = None,
    map_: Annotated[
        str | None,
        typer.Option(
            "--map",
            help="table: field=column,... (pair fields, reply, left|order, seed, verdict, judge).",
        ),
    ] = None,  # fmt: skip
    judge: Annotated[str | None, typer.Option(help="table: the judge's name.")] = None,
    template: Annotated[
        str, typer.Option(help="table: the reply format (template id) to parse.")
    ] = "arena-hard-v1",
    baseline: Annotated[
        str | None,
        typer.Option(help="arena-hard folder: the baseline, if its lines name none (v0.1)."),
    ] = None,
) -> None:
    """Import another tool's judgment files as a run: nothing is sent or paid. Exits as
    `run` does (3 if the run is degraded, 4 if failed)."""
    from tasks.imports import ImportOptions, check_files, read_files
    from tasks.runs.health import EXIT_CODES, RunNotCompleted

    # Refused files are refused before Prefect starts; the flow reads them again from the
    # same process's memo (`read_seeds`).
    options = ImportOptions(
        dataset, str(questions) if questions else None,
        str(answers_dir) if answers_dir else None, map_, judge, template, baseline,
    )  # fmt: skip
    seeds = read_files(fmt, files, options)
    check_files(seeds)
    if run_id is not None:
        from tasks.imports import import_config
        from tasks.runs.jobs import check_import_id

        # An import never replaces a finished run.
        check_import_id(state.work, run_id, import_config(fmt, [str(f) for f in files], seeds))
    prepare_prefect("flows.imports")
    from flows.imports import import_flow

    try:
        record = asyncio.run(import_flow(
            fmt, [str(f) for f in files], state.work.address, run_id, dataset, name,
            str(questions) if questions else None, str(answers_dir) if answers_dir else None,
            map_, judge, template, baseline,
        ))  # fmt: skip
    except RunNotCompleted as exc:
        print_reasons(exc.lines)
        if exc.result is not None:
            _print_imported(exc.result, len(files))
        raise typer.Exit(EXIT_CODES[exc.status]) from None
    _print_imported(record, len(files))


def _print_imported(record: dict[str, Any], files: int) -> None:
    calls = record["calls"]
    console.print(
        f"run [bold]{record['run_id']}[/bold] imported from {files} file(s), K = "
        f"{record['config'].get('k')}: {calls['imported']} replies, {calls['failed']} recorded "
        f"without a reply, {calls['planned']} planned slots, 0 sent",
        highlight=False,
        soft_wrap=True,
    )
    _print_agreement(record.get("imported"))
    console.print(f"report: {record['report']}", highlight=False, soft_wrap=True)


@app.command("reparse")
def reparse(
    run_id: Annotated[str, typer.Argument(help="The run to re-label.", callback=run_id_given)],
) -> None:
    """Re-label a run from its cached replies (current parser) and rebuild everything after,
    its status too; exits as `run` does (3 if the run is degraded, 4 if failed)."""
    from tasks.runs.health import EXIT_CODES, RunNotCompleted
    from tasks.runs.record import read_record

    read_record(state.work, run_id)  # an unknown run is refused before Prefect starts
    prepare_prefect("flows.imports")
    from flows.imports import reparse_flow

    try:
        counts = asyncio.run(reparse_flow(run_id, state.work.address))
    except RunNotCompleted as exc:
        print_reasons(exc.lines)
        if exc.result is not None:
            _print_relabelled(run_id, exc.result)
        raise typer.Exit(EXIT_CODES[exc.status]) from None
    _print_relabelled(run_id, counts)


def _print_relabelled(run_id: str, counts: dict[str, Any]) -> None:
    console.print(
        f"run [bold]{run_id}[/bold] re-labelled under parser {counts['parser_version']}: "
        f"{counts['relabelled']} labels changed, 0 calls sent",
        highlight=False,
        soft_wrap=True,
    )
