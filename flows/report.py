"""The report stage: a run's HTML report and its Prefect artifacts, as a task run of the flow
that calls it (a nightly run, an import, a rerun)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from tasks.store.workdir import WorkDir


@task(name="write-report", cache_policy=NO_CACHE)
def report_task(work_dir: str, run_id: str) -> str:
    """Write the run's HTML report and its Prefect artifacts, both read from the run's
    tables through DuckDB (`warehouse_reads` of this run: the warehouse of every run is
    neither checked nor rebuilt)."""
    from tasks.report.artifacts import publish_artifacts
    from tasks.report.data import build_report
    from tasks.warehouse import warehouse_reads

    work = WorkDir.at(work_dir)
    with warehouse_reads(work, runs=[run_id]):  # the artifacts read what the report read
        where = work.location(build_report(work, run_id))  # a path, or the store's URL
        publish_artifacts(work, run_id, where)
    return where
