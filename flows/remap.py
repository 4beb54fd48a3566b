"""The remap flow: stored replies -> labels -> identity outcomes -> dispositions, gated."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from tasks.remap.outcomes import RemapResult, remap_run, write_remap
from tasks.store.workdir import WorkDir


@task(name="remap-run", cache_policy=NO_CACHE)
def remap_task(work: WorkDir, run_id: str) -> RemapResult:
    """Parse, gate and remap a run in memory (nothing written if any check fails)."""
    from tasks.live.outcomes import remap_live
    from tasks.live.runs import is_live_run

    # A live run's outcomes hold its executed calls only, not M for the calls it skipped.
    return remap_live(work, run_id) if is_live_run(work, run_id) else remap_run(work, run_id)


@task(name="write-remap", cache_policy=NO_CACHE)
def write_task(work: WorkDir, result: RemapResult) -> None:
    """Write labels, outcomes, dispositions and disclosure into the run's folder."""
    write_remap(work, result)


def remap_stage(run_id: str, work_dir: str | None = None) -> dict[str, Any]:
    """Remap one run's slot labels to identity outcomes through the trusted presentation map.
    (The warehouse sees the new tables when next queried: it rebuilds when its files change.)"""
    work = WorkDir.at(work_dir)
    result = remap_task(work, run_id)
    write_task(work, result)
    counts = result.counts()
    get_run_logger().info("remap %s: %s", run_id, counts)
    return counts
