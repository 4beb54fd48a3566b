"""Subcommand advise: the cheapest stopping policy certified within a change budget."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from flows.cli.app import app, console, run_id_given, state
from flows.cli.tables import print_json, print_table


def _share(text: str, option: str, example: str) -> float:
    """`1%` or `0.01` as a share."""
    from tasks.errors import InputError

    raw = text.strip()
    try:
        return float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise InputError(f"{option} {text!r} is not a share such as {example}") from None


@app.command("advise")
def advise_command(
    run_id: Annotated[
        str, typer.Argument(help="A full-grid run with outcomes.parquet.", callback=run_id_given)
    ],
    max_change: Annotated[
        str, typer.Option("--max-change", help="Budget on changed decisions: 1% or 0.01.")
    ] = "1%",
    level: Annotated[
        str, typer.Option("--level", help="Confidence of the certificates: 95% or 0.95.")
    ] = "95%",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the advice rows as JSON (for scripts).")
    ] = False,
) -> None:
    """Advise the cheapest stopping policy certified within a change budget
    (docs/design.md#advice)."""
    from tasks.errors import InputError
    from tasks.replay.advisor import advise, shown
    from tasks.replay.grid import read_replay_input
    from tasks.runfolder import RunFolder
    from tasks.storage import write_parquet_atomic

    budget = _share(max_change, "--max-change", "1% or 0.01")
    confidence = _share(level, "--level", "95% or 0.95")
    folder = RunFolder(state.work, run_id)
    if not folder.outcomes.is_file():
        raise InputError(
            f"run {run_id!r} has no outcomes ({state.work.location(folder.outcomes)}); "
            "remap it first"
        )
    table = advise(
        read_replay_input(folder.outcomes),
        max_change=budget,
        level=confidence,
        where=state.work.location(folder.outcomes),
    )
    frame = shown(table.to_pandas())
    path = folder.table("advice")
    if as_json:
        print_json(
            {"max_change": budget, "level": confidence, "table": state.work.location(path),
             "advice": frame.to_dict("records")}
        )  # fmt: skip
    else:
        _print_advice(frame, budget, confidence)
    # Written after it is shown: a work dir that cannot be written still gets the advice.
    write_parquet_atomic(table, path, overwrite=True)
    if not as_json:
        console.print(f"advice: {state.work.location(path)}", highlight=False)


def _print_advice(frame: Any, budget: float, confidence: float) -> None:
    """The advice as a table (turned or a block per row where it does not fit), then the
    advised policy's note per judge config."""
    headers = ["judge · config", "rank", "policy", "pairs", "savings", "change", "bound",
               "certificate", "pairs to certify"]  # fmt: skip
    rows = []
    for r in frame.to_dict("records"):
        needed = r["pairs_needed"]
        rows.append(
            [
                f"{r['judge']} · {r['config']}",
                r["rank"],
                r["policy"],
                str(r["pairs"]),
                f"{r['savings']:.1%}",
                f"{r['change']:.2%}",
                f"{r['change_bound']:.2%}",
                r["certificate"],
                "-" if needed is None or needed != needed else str(int(needed)),
            ]
        )
    title = (
        f"advice within {budget:.2%} changed decisions, certified at {confidence:.0%} "
        "(balanced design)"
    )
    print_table(console, title, headers, rows, left=3, turn=False)
    for r in frame.to_dict("records"):
        if r["rank"] == "advised":
            console.print(f"{r['judge']}/{r['config']}: {r['note']}", highlight=False)
