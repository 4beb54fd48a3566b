"""Subcommand failures: a run's calls with no stored reply, and what the provider said."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from flows.cli.app import app, console, state
from tasks.workdir import default_address


@app.command("failures")
def failures(run_id: Annotated[str, typer.Argument(help="Run id.")]) -> None:
    """List a run's failed and pending calls per judge, config and category, with the
    provider's message, and the command that sends them again."""
    from tasks.judging.failed_calls import failed_call_groups

    groups = failed_call_groups(state.work, run_id)
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
    work = "" if state.work.address == default_address() else f"--work-dir {state.work.address} "
    console.print(
        f"\nsend them again: judgeline {escape(work)}rerun-failed {escape(run_id)}",
        highlight=False,
        soft_wrap=True,
    )
