"""The `judgeline` command line: one subcommand per user job, each a thin call into flows/."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from flows.runtime import configure_prefect
from tasks.errors import JudgelineError
from tasks.workdir import WorkDir

app = typer.Typer(
    name="judgeline",
    help="Pairwise LLM judging over seeds and display orders, honest about position bias.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


class _State:
    work: WorkDir = WorkDir.at()
    debug: bool = False


state = _State()


@app.callback()
def _main(
    work_dir: Annotated[
        Path | None,
        typer.Option("--work-dir", envvar="JUDGELINE_WORK_DIR", help="Work directory."),
    ] = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
) -> None:
    if not sys.stdout.isatty():
        # Tables go to terminals at their width; to files and pipes wide enough not to cut.
        os.environ.setdefault("COLUMNS", "160")
    state.work = WorkDir.at(work_dir)
    state.debug = debug
    configure_prefect(state.work)


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


# Each cmd_* module registers its subcommands on `app` when imported.
from flows import (  # noqa: E402,F401
    cmd_judge,
    cmd_live,
    cmd_prepare,
    cmd_remap,
    cmd_replay,
    cmd_run,
    cmd_simjudge,
)
