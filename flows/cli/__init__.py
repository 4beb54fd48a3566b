"""The `judgeline` command line: one subcommand per user job, each a thin call into flows/.

`flows.cli.app` holds the Typer app; each other module of this package registers one
group of subcommands on it when imported.
"""

from __future__ import annotations

import sys

from rich.markup import escape

from flows.cli import (
    advise,
    estimate,
    failures,
    history,
    imports,
    judge,
    live,
    prepare,
    remap,
    replay,
    run,
    simjudge,
)
from flows.cli.app import app, err_console
from tasks.errors import JudgelineError

__all__ = ["app", "main"]

COMMAND_GROUPS = (
    advise,
    estimate,
    failures,
    history,
    imports,
    judge,
    live,
    prepare,
    remap,
    replay,
    run,
    simjudge,
)
"""The modules whose subcommands `app` serves (imported for their registrations)."""


def main() -> None:
    """Console entry point: user errors print as one paragraph, tracebacks only with --debug."""
    try:
        app()
    except JudgelineError as exc:
        if "--debug" in sys.argv:
            raise
        # Messages quote file contents (values, column names, ids): escaped, a `[/x]` in
        # them is text, not rich markup that would crash or vanish.
        err_console.print(
            f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False, soft_wrap=True
        )
        raise SystemExit(2) from None
