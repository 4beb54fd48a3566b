"""Subcommand failures: a run's calls with no stored reply, and what the provider said."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from flows.cli.app import app, console, run_id_given, state
from flows.cli.tables import print_json
from tasks.store.workdir import default_address


@app.command("failures")
def failures(
    run_id: Annotated[str, typer.Argument(help="Run id.", callback=run_id_given)],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the groups as JSON (for scripts).")
    ] = False,
) -> None:
    """List a run's failed and pending calls per judge, config and category, with the
    provider's message, and the command that sends them again."""
    from tasks.judging.failed_calls import failed_call_groups

    groups = failed_call_groups(state.work, run_id)
    work = "" if state.work.address == default_address() else f"--work-dir {state.work.address} "
    again = f"judgeline {work}rerun-failed {run_id}"
    if as_json:
        print_json(
            {
                "run_id": run_id,
                "calls": sum(g.calls for g in groups),
                "groups": [
                    {"judge": g.judge, "config": g.config, "status": g.status,
                     "category": g.category, "calls": g.calls,
                     "messages": [{"message": m, "calls": n}
                                  for m, n in g.messages.most_common()]}
                    for g in groups
                ],
                "rerun": again if groups else None,
            }
        )  # fmt: skip
        return
    if not groups:
        console.print(
            f"run {escape(run_id)}: every planned call has a stored reply", highlight=False
        )
        return
    total = sum(g.calls for g in groups)
    console.print(
        f"run [bold]{escape(run_id)}[/bold]: {total} calls without a stored reply",
        highlight=False,
        soft_wrap=True,
    )
    for g in groups:
        console.print(
            f"\n[bold]{escape(g.judge)} · {escape(g.config)}[/bold]: {g.calls} {g.status} "
            f"({escape(g.category)})",
            highlight=False,
        )
        for message, count in g.messages.most_common():
            # Whole and wrapped: a provider's message is the one clue to what went wrong.
            console.print(Padding(Text(f"{count} × {message}"), (0, 0, 0, 2)))
    console.print(
        f"\nsend them again: {escape(again)}",
        highlight=False,
        soft_wrap=True,
    )
