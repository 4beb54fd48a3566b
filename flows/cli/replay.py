"""Subcommand replay: stopping policies over cached outcomes."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from flows.cli.app import app, console, fits

_SHOWN = (
    ("expected_calls", "calls", "{:.3f}"),
    ("savings", "savings", "{:.1%}"),
    ("p_change", "changed", "{:.2%}"),
    ("p_neutral_to_decisive", "N->dec", "{:.2%}"),
    ("p_decisive_to_neutral", "dec->N", "{:.2%}"),
    ("p_reversal", "reversed", "{:.2%}"),
    ("expected_score", "score", "{:.4f}"),
    ("reference_score", "ref score", "{:.4f}"),
    ("added_variance", "+variance", "{:.4f}"),
    ("match_cost", "match cost", "{:.3f}"),
    ("match_extra", "match extra", "{:+.1%}"),
)


def summary_lines(rows: list[dict[str, object]]) -> list[str]:
    """The replay summary as one wrapped paragraph per row, for terminals too narrow for
    its table (a table would cut its numbers to `0.…`)."""
    lines = []
    for row in rows:
        key = " · ".join(str(row[n]) for n in ("judge", "config", "dataset", "design", "policy"))
        values = ", ".join(
            f"{header} {'-' if row[name] is None else fmt.format(row[name])}"
            for name, header, fmt in _SHOWN
        )
        lines.append(f"{key} ({row['pairs']} pairs): {values}")
    return lines


def summary_table(rows: list[dict[str, object]]) -> Table:
    """The replay summary as a rich table, one line per (group, design, policy)."""
    table = Table(title="replay summary", show_lines=False)
    for name in ("judge", "config", "dataset", "design", "policy", "pairs"):
        table.add_column(name, justify="right" if name == "pairs" else "left")
    for _, header, _ in _SHOWN:
        table.add_column(header, justify="right")
    for row in rows:
        cells = [str(row[n]) for n in ("judge", "config", "dataset", "design", "policy", "pairs")]
        for name, _, fmt in _SHOWN:
            value = row[name]
            cells.append("-" if value is None else fmt.format(value))
        table.add_row(*cells)
    return table


@app.command("replay")
def replay_command(
    calls: Annotated[
        str,
        typer.Option(
            "--calls",
            help="Outcomes parquet: the replay input, or a run's outcomes.parquet (a path or "
            "an object store URL).",
        ),
    ],
    out: Annotated[
        str,
        typer.Option(
            "--out",
            help="Folder for the replay, summary, design and components tables (a path or an "
            "object store URL).",
        ),
    ],
    design: Annotated[
        list[str] | None,
        typer.Option("--design", help="Design to replay (repeatable); default: all three."),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option("--policy", help="Policy to replay (repeatable); default: all four."),
    ] = None,
) -> None:
    """Replay stopping policies exactly over cached outcomes; no judge (docs/design.md#replay)."""
    import pyarrow.parquet as pq

    from schemas.vocabulary import CORE_POLICIES, DESIGNS
    from tasks.errors import InputError
    from tasks.replay.coded import require_columns
    from tasks.replay.money import outcome_costs
    from tasks.replay.places import Output, input_file
    from tasks.replay.stream import replay_file

    path = input_file(calls)
    try:
        schema = pq.read_schema(path)
    except (OSError, ValueError) as exc:
        raise InputError(f"not a readable parquet file ({exc})", file=calls) from None
    require_columns(schema.names, calls)
    target = Output(out)
    # The job runs here, without a flow run (as freeze and plan do): a file in, four tables
    # out, nothing to orchestrate. The replay-policies flow and deployment do the same.
    written = replay_file(
        path, target.folder, designs=list(design or DESIGNS),
        policies=list(policy or CORE_POLICIES), costs=outcome_costs(path),
    )  # fmt: skip
    paths = {name: target.location(file) for name, file in written.items()}
    rows = pq.read_table(written["summary"]).to_pylist()
    table = summary_table(rows)
    if fits(table):
        console.print(table)
    else:
        console.print("replay summary", style="italic")
        for line in summary_lines(rows):
            console.print(line, highlight=False)
    for name, where in paths.items():
        console.print(f"{name}: {where}", highlight=False)
