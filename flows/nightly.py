"""The nightly benchmark: freeze -> plan -> judge -> remap -> replay -> aggregate -> report.

One parent flow whose stages run as its task runs (the judge stage's batches a task run each,
which it can send to Dask); every stage gates what it reads. The run's
record (`runs/<run_id>/record.json`) says what went in, which code ran, when, and the
count of every outcome category. Rerunning with the same inputs reuses every cached call
and reproduces the same tables.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import get_run_logger

from flows.history import alarms_task, emit_alarms, probe_task
from flows.judge import judge_stage, rerun_failed_stage
from flows.prepare import freeze_stage, plan_stage
from flows.remap import remap_stage
from flows.replay import replay_stage
from flows.report import report_task
from flows.runtime import flow
from flows.served import refuse_overrides, refuse_overrides_sync
from schemas.config import RunConfig
from schemas.run import RunRecord
from schemas.vocabulary import CORE_POLICIES, DESIGNS
from tasks.errors import InputError
from tasks.live.advice import follow_advice, realised_against_advised
from tasks.runs.config import load_run_config
from tasks.runs.folder import RunFolder
from tasks.runs.health import raise_unless_completed
from tasks.runs.jobs import judged_config, new_record, recorded_run, settle_status
from tasks.runs.preflight import check_keys, check_run
from tasks.runs.record import new_run_id, outcome_counts, read_record, write_record
from tasks.store.workdir import WorkDir


def resolve_config(config: dict[str, Any] | None, config_path: str | None) -> RunConfig:
    """The run configuration from a dict (deployment parameter) or a YAML file."""
    if config is not None:
        return RunConfig.model_validate(config)
    if config_path is None:
        raise ValueError("give a run configuration: config or config_path")
    return load_run_config(config_path)


@flow(name="nightly-benchmark", on_completion=[emit_alarms], on_failure=[emit_alarms])
async def nightly_flow(
    config_path: str | None = None,
    config: dict[str, Any] | None = None,
    run_id: str | None = None,
    work_dir: str | None = None,
    show_progress: bool = False,
) -> dict[str, Any]:
    """Run every stage for one configuration; returns the run record as a dict."""
    await refuse_overrides({"config_path": config_path, "config": config, "work_dir": work_dir})
    cfg = resolve_config(config, config_path)
    work = WorkDir.at(work_dir or cfg.work_dir)
    # Checked before any record is written: a refused run leaves no entry in `runs`.
    check_run(cfg, work, run_id)
    await check_keys(cfg)
    run_id = run_id or new_run_id()
    record = new_record(run_id, cfg.name, cfg.model_dump(mode="json"))
    # Freezing and planning write shared, content-addressed files only; a dataset that
    # cannot be frozen is refused here, and the plan tells whether a run already under this
    # id is of these pairs.
    clock = time.perf_counter()
    datasets = [d.model_dump() for d in cfg.datasets]
    record.manifest_hash = freeze_stage(datasets, str(work.root))
    record.stage_seconds["freeze"] = round(time.perf_counter() - clock, 3)
    clock = time.perf_counter()
    record.plan_id = plan_stage(record.manifest_hash, cfg.k, "full", None, str(work.root))
    record.stage_seconds["plan"] = round(time.perf_counter() - clock, 3)
    # The run's lock, and a run under this id of another configuration or plan refused
    # (either way nothing is written); the record says `running` until the stages end,
    # then their status or the error.
    with recorded_run(work, record):
        await _stages(cfg, work, record, show_progress)
    # Everything is written: a degraded or failed run now ends its flow run Failed.
    raise_unless_completed(run_id, record.status, record.health)
    get_run_logger().info("run %s completed: %s", run_id, record.outcomes)
    return record.model_dump(mode="json")


async def _stages(cfg: RunConfig, work: WorkDir, record: RunRecord, show_progress: bool) -> None:
    """Every stage after the plan, in order, filling in `record` (and each stage's seconds)."""
    root, run_id = work.address, record.run_id
    logger = get_run_logger()
    clock = time.perf_counter()

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        record.stage_seconds[stage] = round(now - clock, 3)
        clock = now

    assert record.manifest_hash is not None and record.plan_id is not None
    if cfg.live is None:
        record.calls = await judge_stage(
            run_id, record.plan_id, cfg.judges, cfg.template, cfg.batch_size, root,
            show_progress, dask_address=cfg.dask_address,
        )  # fmt: skip
        lap("judge")
        remap_stage(run_id, root)
        lap("remap")
    else:
        # Live stopping: waves of calls instead of the full grid, remapped as they go (a
        # subflow, imported here: a run without it does not build it).
        from flows.live import live_flow

        advised = (
            None
            if cfg.live.advised_by is None
            else follow_advice(work, run_id, cfg.live, cfg.judges)
        )
        live = await live_flow(
            run_id, record.plan_id, cfg.judges, cfg.live.rng_seed, cfg.template,
            cfg.batch_size, root, show_progress,
        )  # fmt: skip
        record.calls, record.live = live["calls"], live["live"]
        for line in realised_against_advised(RunFolder(work, run_id), advised or {}):
            logger.info(line)
        lap("live")
    folder = RunFolder(work, run_id)
    record.outcomes = outcome_counts(folder)
    if cfg.live is None:
        # The replay needs the full grid; a live run's report takes its expected side
        # from the latest full-grid run of the same plan and judges (tasks.report.data).
        replay_stage(str(folder.outcomes), str(folder.path), list(cfg.designs), list(cfg.policies))
        lap("replay")
    if cfg.probe is not None:
        record.probe = await probe_task(root, run_id, record.manifest_hash, record.config)
        lap("probe")
        write_record(work, record)  # the report's "since" section reads the probe
    record.report = report_task(root, run_id)
    lap("report")
    settle_status(work, record)
    if cfg.alarms is not None:
        record.alarms = alarms_task(root, record.model_dump(mode="json"))


def _replay_and_report(work: WorkDir, run_id: str, designs: list[str], policies: list[str]) -> str:
    folder = RunFolder(work, run_id)
    replay_stage(str(folder.outcomes), str(folder.path), designs, policies)
    return report_task(work.address, run_id)


@flow(name="rerun-failed-run")
async def rerun_run_flow(
    run_id: str,
    work_dir: str | None = None,
    show_progress: bool = False,
    dask_address: str | None = None,
) -> dict[str, Any]:
    """Send again the calls of a run that have no stored reply, then rebuild its remap,
    replay, record counts, warehouse, report and status (`judgeline rerun-failed` runs this
    too); a run still degraded or failed ends this flow run Failed. `dask_address` overrides
    the run configuration's.

    A run judged without a record (by the judge flow alone) gets one now, and the replay
    takes every design and policy."""
    await refuse_overrides({"work_dir": work_dir, "dask_address": dask_address})
    work = WorkDir.at(work_dir)
    folder = RunFolder(work, run_id)
    info = folder.read_info()
    record = (
        read_record(work, run_id)
        if folder.record.exists()
        else new_record(run_id, "judge", judged_config(info.plan_id, info.template_id, info.judges))
    )
    if record.live is not None or info.live is not None:
        # Resending a live run's failed calls would change which pairs stop after the fact.
        raise InputError(
            f"run {run_id} ran paired unanimity live; start a new live run instead (it "
            "reuses every stored reply and sends the failed calls again)"
        )
    try:
        cfg: RunConfig | None = RunConfig.model_validate(record.config)
    except ValueError:
        cfg = None  # a judge run's record: its plan and judges only
    designs, policies = (cfg.designs, cfg.policies) if cfg else (DESIGNS, CORE_POLICIES)
    if dask_address is None and cfg is not None:
        dask_address = cfg.dask_address
    with recorded_run(work, record):
        counts: dict[str, Any] = await rerun_failed_stage(
            run_id, work.address, show_progress, dask_address
        )
        record.calls = counts
        remap_stage(run_id, work.address)
        record.outcomes = outcome_counts(folder)
        record.report = _replay_and_report(work, run_id, list(designs), list(policies))
        settle_status(work, record)
    raise_unless_completed(run_id, record.status, record.health)
    return counts


@flow(name="replay-run")
def replay_policies_flow(
    run_id: str,
    designs: list[str] | None = None,
    policies: list[str] | None = None,
    work_dir: str | None = None,
) -> str:
    """Replay stopping policies over a run's stored outcomes and rebuild its report.

    Reads outcomes only: it never calls a judge.
    """
    refuse_overrides_sync({"work_dir": work_dir})
    work = WorkDir.at(work_dir)
    return _replay_and_report(
        work, run_id, list(designs or DESIGNS), list(policies or CORE_POLICIES)
    )
