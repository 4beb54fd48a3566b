"""Subcommand estimate: calls, tokens and money of a run before anything is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.app import app, print_rows, state


@app.command("estimate")
def estimate(
    config: Annotated[Path, typer.Argument(help="Run configuration (YAML).")],
) -> None:
    """Planned, cached and to-send calls, tokens and USD per judge config; sends nothing."""
    from tasks.judging.estimate import ESTIMATE_NOTE, estimate_config

    rows = estimate_config(config, state.work)
    print_rows(f"estimate · {config}", rows, ESTIMATE_NOTE)
