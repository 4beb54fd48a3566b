"""Subcommands remap: slot labels to identity outcomes and dispositions."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from flows.cli.app import app, console, prepare_prefect, run_id_given, state
from tasks.runs.folder import RunFolder

_DISCLOSURE_COLUMNS = (
    "planned",
    "valid",
    "missing",
    "invalid",
    "abstained",
    "tied",
    "stable",
    "conflicting",
    "mixed",
    "stable_tie",
    "incomplete",
    "stable_correct",
    "stable_wrong",
)


def _share(value: Any) -> str:
    return "-" if value is None else f"{value:.1%}"


@app.command("remap")
def remap(
    run_id: Annotated[str, typer.Argument(help="The run to remap.", callback=run_id_given)],
) -> None:
    """Remap a run's stored replies through the trusted presentation map (no judge calls)."""
    from rich.table import Table

    RunFolder(state.work, run_id).read_info()  # an unknown run is refused before Prefect starts
    prepare_prefect("flows.stageflows", records=False)
    from flows.stageflows import remap_flow

    counts = remap_flow(run_id, state.work.address)
    outcomes = ", ".join(f"{code} {n}" for code, n in counts["outcomes"].items())
    console.print(
        f"run [bold]{run_id}[/bold]: {counts['planned']} planned slots, outcomes {outcomes} "
        f"(parser {counts['parser_version']})",
        highlight=False,
        soft_wrap=True,
    )
    disp = ", ".join(f"{name} {n}" for name, n in counts["dispositions"].items() if n)
    console.print(f"two-order dispositions: {disp or 'none'}", highlight=False, soft_wrap=True)

    from tasks.storage import read_parquet

    rows = read_parquet(RunFolder(state.work, run_id).disclosure).to_pylist()
    # One column per (judge, config, dataset) so the table fits a narrow terminal.
    table = Table(title="Disclosure (consistency and accuracy apart)")
    table.add_column("count")
    for row in rows:
        table.add_column(f"{row['judge']}\n{row['config']}\n{row['dataset']}", justify="right")
    for col in _DISCLOSURE_COLUMNS:
        table.add_row(col, *(str(row[col]) for row in rows))
    table.add_row("consistency", *(_share(row["consistency"]) for row in rows))
    table.add_row("accuracy of stable", *(_share(row["accuracy_of_stable"]) for row in rows))
    console.print(table)
