"""The replay-policies flow: cached call outcomes -> replay, summary, design and components tables.

It reads outcomes only: it never calls a judge. The outcomes file is read once and replayed
group by group (`tasks.replay.stream.replay_file`), so memory stays bounded on large runs.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from schemas.vocabulary import CORE_POLICIES, DESIGNS
from tasks.replay.stream import replay_file


@task(name="replay-policies", cache_policy=NO_CACHE)
def replay_task(
    calls_path: str, out_dir: str, designs: list[str], policies: list[str]
) -> dict[str, str]:
    """Replay every requested policy under every requested design, exactly, and write the
    tables into `out_dir` (with the money columns when `calls_path` is a run's outcomes and
    its judges have prices). Either may be an object store URL (`tasks.replay.places`)."""
    from tasks.replay.money import outcome_costs
    from tasks.replay.places import Output, input_file

    path, target = input_file(calls_path), Output(out_dir)
    costs = outcome_costs(path)
    paths = replay_file(path, target.folder, designs=designs, policies=policies, costs=costs)
    return {name: target.location(path) for name, path in paths.items()}


def replay_stage(
    calls_path: str,
    out_dir: str,
    designs: list[str] | None = None,
    policies: list[str] | None = None,
) -> dict[str, str]:
    """Replay stopping policies over cached outcomes; returns the written paths (or URLs)
    by table."""
    paths = replay_task(
        str(calls_path), out_dir, list(designs or DESIGNS), list(policies or CORE_POLICIES)
    )
    get_run_logger().info("replayed into %s", ", ".join(paths.values()))
    return paths
