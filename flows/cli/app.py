"""The `judgeline` Typer app, its consoles and global options, and what several groups of
subcommands share (judges files, Prefect set-up)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from flows.runtime import configure_prefect, detach_embedded_server
from tasks.errors import InputError
from tasks.workdir import WorkDir

if TYPE_CHECKING:
    from schemas.judge import JudgeSpec

__all__ = [
    "DaskAddress",
    "app",
    "console",
    "err_console",
    "load_judges",
    "prepare_prefect",
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
    debug: bool = False


state = State()


@app.callback()
def global_options(
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
    configure_prefect(state.work, debug=debug)


DaskAddress = Annotated[
    str | None,
    typer.Option(
        "--dask-address",
        envvar="JUDGELINE_DASK_ADDRESS",
        help="Run the batches on this Dask scheduler, e.g. tcp://10.0.0.5:8786.",
    ),
]


def prepare_prefect() -> None:
    """Process settings for the jobs that run flows, before their flows are imported."""
    # A loaded machine can take more than Prefect's default 20 s to start its server.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    # A terminal's Ctrl-C must reach judgeline only, which stops its judge stage cleanly.
    detach_embedded_server()


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
