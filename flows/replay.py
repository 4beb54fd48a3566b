"""The replay-policies flow: cached call outcomes -> replay, summary and design tables.

It reads outcomes only: it never calls a judge.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from schemas.vocabulary import CORE_POLICIES, DESIGNS
from tasks.replay.engine import ReplayResult, replay, write_replay
from tasks.replay.grid import read_replay_input


@task(name="read-outcomes", cache_policy=NO_CACHE)
def read_task(calls_path: str) -> pa.Table:
    """Read the replay input columns of an outcomes parquet file."""
    return read_replay_input(calls_path)


@task(name="replay-policies", cache_policy=NO_CACHE)
def replay_task(
    outcomes: pa.Table, designs: list[str], policies: list[str], where: str
) -> ReplayResult:
    """Replay every requested policy under every requested design, exactly (with the money
    columns when `where` is a run's outcomes and its judges have prices)."""
    from tasks.judging.spend import outcome_costs

    costs = outcome_costs(where)
    return replay(outcomes, designs=designs, policies=policies, where=where, costs=costs)


@task(name="write-replay", cache_policy=NO_CACHE)
def write_task(result: ReplayResult, out_dir: str) -> dict[str, str]:
    """Write replay.parquet, summary.parquet and design.parquet into `out_dir`."""
    return {name: str(path) for name, path in write_replay(result, out_dir).items()}


@flow(name="replay-policies")
def replay_flow(
    calls_path: str,
    out_dir: str,
    designs: list[str] | None = None,
    policies: list[str] | None = None,
) -> dict[str, str]:
    """Replay stopping policies over cached outcomes; returns the written paths by table."""
    outcomes = read_task(calls_path)
    result = replay_task(
        outcomes, list(designs or DESIGNS), list(policies or CORE_POLICIES), str(Path(calls_path))
    )
    paths = write_task(result, out_dir)
    get_run_logger().info(
        "replayed %d pair rows into %s", result.replay.num_rows, ", ".join(paths.values())
    )
    return paths
