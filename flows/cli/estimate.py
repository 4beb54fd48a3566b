"""Subcommand estimate: calls, tokens and money of a run before anything is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.app import app, err_console, print_rows, state
from flows.cli.tables import print_json


def print_estimate(config: Path, as_json: bool = False) -> None:
    """The estimate of a run configuration (`estimate`, `run --dry-run`), then a warning for
    each judge key variable that is unset here (the run would be refused for it) and each
    judge config a run would waste (`judge_warnings`), on stderr. `as_json`: the rows as a
    JSON list, one object per judge config."""
    from tasks.judging.estimate import ESTIMATE_NOTE, estimate_config
    from tasks.prompts.preflight import judge_warnings
    from tasks.runs.config import load_run_config
    from tasks.runs.preflight import unset_key_variables

    rows = estimate_config(config, state.work)
    if as_json:
        print_json([r.model_dump(mode="json") for r in rows])
    else:
        print_rows(f"estimate · {config}", rows, ESTIMATE_NOTE)
    cfg = load_run_config(config)
    warn(unset_key_variables(cfg.judges, cfg.dask_address) + judge_warnings(cfg.judges))


def warn(lines: list[str]) -> None:
    """Each line as `warning: ...` on stderr."""
    for line in lines:
        err_console.print(f"warning: {line}", highlight=False, soft_wrap=True)


@app.command("estimate")
def estimate(
    config: Annotated[Path, typer.Argument(help="Run configuration (YAML).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the rows as JSON (for scripts).")
    ] = False,
) -> None:
    """Planned, cached and to-send calls, tokens and USD per judge config; sends nothing."""
    print_estimate(config, as_json)
