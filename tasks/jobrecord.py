"""Run records of every job that judges, and the state of each run as `runs` shows it.

`recorded_run` holds a run's lock while it keeps the run's `record.json` (so a process
refused the lock never writes into another's run); `judge`, `live` and imported runs get a
record this way, like nightly runs, and `rerecorded_run` keeps the record of a run that
exists (a reparse). `settle_status` sets a record's health and status from the run's tables:
every job that makes or changes a run's outcomes ends with it. `scan_records` reads every
record: a damaged one is listed, not skipped, and a `running` record whose lock is free
belongs to a process that died.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.run import RunRecord
from tasks.errors import IntegrityError, describe_validation
from tasks.hashing import canonical_json, sha256_text
from tasks.judging.claims import RunLock
from tasks.runfolder import RECORD_FILE, RunFolder, is_run_id
from tasks.runhealth import run_health, run_status
from tasks.runrecord import code_version, read_record, write_record
from tasks.workdir import WorkDir, disk_full

__all__ = [
    "RunEntry",
    "check_reuse",
    "check_unused",
    "judged_config",
    "lock_is_free",
    "new_record",
    "recorded_run",
    "rerecorded_run",
    "resume_command",
    "scan_records",
    "settle_status",
]


def new_record(run_id: str, name: str, config: dict[str, Any]) -> RunRecord:
    """A `running` record for a run starting now."""
    return RunRecord(
        run_id=run_id,
        name=name,
        status="running",
        config_hash=sha256_text(canonical_json(config)),
        config=config,
        code=code_version(),
        started_at=dt.datetime.now(dt.UTC),
    )


def judged_config(
    plan_id: str, template_id: str | None, judges: list[dict[str, Any]], **more: Any
) -> dict[str, Any]:
    """What a judge or live run's calls are made from, as its record's configuration."""
    return {"plan_id": plan_id, "template": template_id, "judges": judges, **more}


def check_reuse(
    work: WorkDir,
    run_id: str,
    config: dict[str, Any],
    *,
    plan_id: str | None = None,
    manifest_hash: str | None = None,
) -> None:
    """Refuse to make a run of `config` under an id that holds another run: an
    IntegrityError naming what differs, before anything is written.

    Another run is a record of another configuration (or of another manifest or plan: the
    dataset files changed), a record that cannot be read, or a `run.json` (a run judged
    without a record) of another plan, manifest, template or judges. The same configuration
    may run again under its id: that resumes an interrupted run, resends a degraded run's
    failed calls, and rebuilds a completed run from the cache (nothing is sent twice).
    """
    folder = RunFolder(work, run_id)
    mine = {"plan_id": plan_id, "manifest_hash": manifest_hash}
    if folder.record.exists():
        old = folder.read_record()  # a damaged record: an IntegrityError, nothing replaced
        before, now = _canonical(old.config), _canonical(config)
        keys = sorted(k for k in {*before, *now} if before.get(k) != now.get(k))
        if keys:
            raise IntegrityError(
                f"run {run_id} exists and was made with another configuration (it differs in "
                f"{', '.join(keys)}: {folder.record}); it is left as it is: use a new --run-id "
                "(`judgeline runs` lists the ids in use)"
            )
        _refuse_other(folder.record, run_id, mine, old.model_dump())
        return
    info = folder.find_info()  # a run judged without a record: its run.json says what it is
    if info is not None:
        mine |= {"template_id": config.get("template"), "judges": config.get("judges")}
        _refuse_other(folder.info, run_id, mine, info.model_dump())


def _canonical(config: dict[str, Any]) -> dict[str, Any]:
    """A run configuration with every default filled in (a record written before a field
    existed names the same configuration); other jobs' configurations as they are."""
    from schemas.config import RunConfig

    try:
        return RunConfig.model_validate(config).model_dump(mode="json")
    except ValueError:
        return dict(config)


def _refuse_other(path: Path, run_id: str, mine: dict[str, Any], theirs: dict[str, Any]) -> None:
    fields = sorted(f for f, v in mine.items() if v is not None and theirs.get(f) not in (None, v))
    if fields:
        raise IntegrityError(
            f"run {run_id} exists and differs from this job in {', '.join(fields)} ({path}; "
            "a dataset file, the plan, the template or the judges changed); it is left as it "
            "is: use a new --run-id"
        )


def check_unused(work: WorkDir, run_id: str) -> None:
    """Refuse an id that holds a run (a record or a run.json): for jobs that never reuse one."""
    folder = RunFolder(work, run_id)
    for path in (folder.record, folder.info):
        if path.exists():
            raise IntegrityError(
                f"run {run_id} already holds a run ({path}); it is left as it is: give a new "
                "--run-id (`judgeline runs` lists the ids in use)"
            )


@contextmanager
def recorded_run(
    work: WorkDir, record: RunRecord, *, timed: str | None = None
) -> Iterator[RunRecord]:
    """Hold the run's lock and keep its record: `running` on entry, `completed` (unless the
    caller set another status) or `failed` (with the error) on exit; the caller fills in
    counts on the record meanwhile. With `timed`, the whole job's seconds go to the record's
    `stage_seconds[timed]`. Refused the lock, or refused an id that holds another run
    (`check_reuse`), nothing is written."""
    with RunLock(work, record.run_id, nestable=True):
        check_reuse(
            work,
            record.run_id,
            record.config,
            plan_id=record.plan_id,
            manifest_hash=record.manifest_hash,
        )
        record.status, record.error, record.ended_at = "running", None, None
        write_record(work, record)
        clock = time.perf_counter()
        error: BaseException | None = None
        try:
            yield record
            if record.status == "running":  # a caller may have judged it degraded or failed
                record.status = "completed"
        except BaseException as exc:
            error = exc
            record.status = "failed"
            record.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if timed is not None:
                record.stage_seconds[timed] = round(time.perf_counter() - clock, 3)
            record.ended_at = dt.datetime.now(dt.UTC)
            try:
                write_record(work, record)
            except OSError as exc:
                # A job stopped by a full disk: its error says so; the record written on
                # entry stays (`running`: listed as interrupted once this process ends).
                if error is None or not disk_full(exc):
                    raise


@contextmanager
def rerecorded_run(work: WorkDir, run_id: str, *, timed: str | None = None) -> Iterator[RunRecord]:
    """`recorded_run` for a run that has a record, read once the lock is held (a job that
    ended meanwhile is not overwritten by the copy read before it ended). A run without a
    record is refused before the lock makes its folder."""
    read_record(work, run_id)
    with (
        RunLock(work, run_id, nestable=True),
        recorded_run(work, read_record(work, run_id), timed=timed) as record,
    ):
        yield record


def settle_status(work: WorkDir, record: RunRecord) -> None:
    """The record's health and status (completed, degraded or failed) from the run's calls
    and outcomes (docs/design.md#run-status); `recorded_run` then keeps that status."""
    record.health = run_health(RunFolder(work, record.run_id))
    record.status = run_status(record.health)


def lock_is_free(work: WorkDir, run_id: str) -> bool:
    """True if no process holds the run's lock (a missing lock file is free)."""
    try:
        fd = os.open(RunFolder(work, run_id).lock, os.O_RDONLY)
    except FileNotFoundError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing drops the probe's lock
    return True


@dataclass(frozen=True)
class RunEntry:
    """One run as listed: its record (None if damaged), its shown status, and the problem."""

    run_id: str
    record: RunRecord | None
    status: str
    problem: str | None = None


def scan_records(work: WorkDir) -> list[RunEntry]:
    """Every run folder with a record, newest first, then damaged and foreign ones.

    A damaged record is an entry with status `damaged` and the problem (naming the file); a
    `running` record whose lock is free is `interrupted`: the process that ran it died. A
    folder under `runs/` whose name is not a run id (`tasks.runfolder.is_run_id`) is
    `foreign`: no command made it, and every reader skips it.
    """
    good: list[RunEntry] = []
    damaged: list[RunEntry] = []
    foreign: list[RunEntry] = []
    runs = work.root / "runs"
    for folder in sorted(runs.iterdir()) if runs.is_dir() else []:
        run_id = folder.name
        if not folder.is_dir():
            continue
        if not is_run_id(run_id):
            problem = (
                f"{runs}/{run_id!r} is not a run's folder ({run_id!r} is not a run id: no "
                "judgeline command made it); every command skips it"
            )
            foreign.append(RunEntry(run_id, None, "foreign", problem))
            continue
        path = folder / RECORD_FILE
        if not path.exists():
            continue
        try:
            record = RunRecord.model_validate_json(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            problem = f"{path} is damaged and cannot be read ({describe_validation(exc)})"
            damaged.append(RunEntry(run_id, None, "damaged", problem))
            continue
        status: str = record.status
        if status == "running" and lock_is_free(work, run_id):
            status = "interrupted"
        good.append(RunEntry(run_id, record, status))
    good.sort(key=lambda e: e.record.started_at if e.record else dt.datetime.min, reverse=True)
    return good + damaged + foreign


def resume_command(entry: RunEntry) -> str:
    """The command that takes an interrupted run up again."""
    if entry.record is not None and entry.record.plan_id is not None:
        return f"judgeline rerun-failed {entry.run_id}"
    return f"judgeline run CONFIG.yaml --run-id {entry.run_id}"
