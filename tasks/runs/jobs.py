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
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from schemas.run import RunRecord
from tasks.errors import (
    DiskFull,
    IntegrityError,
    Interrupted,
    StoreDown,
    StoreUnreachable,
    describe_validation,
    stop_cause,
)
from tasks.hashing import canonical_json, sha256_text
from tasks.judging.claims import RunLock, run_lock_is_free
from tasks.runs.folder import RECORD_FILE, RunFolder, is_run_id, parse_record
from tasks.runs.health import run_health, run_status
from tasks.runs.record import code_version, read_record, write_record
from tasks.store.workdir import WorkDir, describe_filesystem, disk_full

__all__ = [
    "ACTIVE",
    "SETTLED",
    "record_interrupted",
    "RunEntry",
    "check_reuse",
    "check_import_id",
    "judged_config",
    "lock_is_free",
    "new_record",
    "no_room",
    "recorded_run",
    "rerecorded_run",
    "resume_command",
    "resume_kind",
    "scan_records",
    "settle_status",
]


ACTIVE: dict[str, tuple[WorkDir, RunRecord]] = {}
"""The records `recorded_run` keeps in this process now, by run id."""
SETTLED: list[tuple[WorkDir, RunRecord]] = []
"""Those it has written for the last time (a command that must stop at once, its Prefect
server gone, says how each ended: `flows.serverwatch`)."""


def _interrupted(record: RunRecord, stopped: Interrupted) -> None:
    record.status, record.error = "interrupted", str(stopped)
    record.calls = stopped.counts or record.calls


def record_interrupted(work: WorkDir, record: RunRecord, stopped: Interrupted) -> None:
    """Write `record` as `interrupted` by `stopped`, now."""
    _interrupted(record, stopped)
    record.ended_at = dt.datetime.now(dt.UTC)
    write_record(work, record)


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


def check_import_id(work: WorkDir, run_id: str, config: dict[str, Any]) -> None:
    """Refuse an import under an id that holds a run, unless that run is an import of the
    same files that did not finish (an import sends nothing: it is taken up by importing
    again). An IntegrityError; nothing is written."""
    folder = RunFolder(work, run_id)
    if folder.record.exists():
        old = folder.read_record()  # a damaged record: an IntegrityError, nothing replaced
        if old.status in ("running", "interrupted") and old.config == config:
            return
        raise IntegrityError(
            f"run {run_id} already holds a run ({folder.record}, {old.status}); it is left as "
            "it is: give a new --run-id (`judgeline runs` lists the ids in use; `judgeline "
            "reparse RUN` re-labels an imported run)"
        )
    if folder.info.exists():
        raise IntegrityError(
            f"run {run_id} already holds a run ({folder.info}); it is left as it is: give a "
            "new --run-id (`judgeline runs` lists the ids in use)"
        )


@contextmanager
def recorded_run(
    work: WorkDir, record: RunRecord, *, timed: str | None = None
) -> Iterator[RunRecord]:
    """Hold the run's lock and keep its record: `running` on entry, `completed` (unless the
    caller set another status), `interrupted` on a signal or a full disk (raised as
    Interrupted) or `failed` (with the error) on exit; the caller fills in counts on the
    record meanwhile. With `timed`, the whole job's seconds go to the record's
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
        ACTIVE[record.run_id] = (work, record)
        clock = time.perf_counter()
        error: BaseException | None = None
        try:
            yield record
            if record.status == "running":  # a caller may have judged it degraded or failed
                record.status = "completed"
        except Interrupted as exc:
            error = exc
            _interrupted(record, exc)
            raise
        except BaseException as exc:
            error = exc
            # Whatever ends a job once its Prefect server went away (`stop_for`) stops it.
            signum = _stop_signal(exc) or (signal.SIGTERM if stop_cause(signal.SIGTERM) else None)
            stopped = (
                Interrupted(record.run_id, signum, record.calls)
                if signum is not None  # outside the judge stage, which raises its own
                else no_room(work, record.run_id, exc, record.calls)
            )
            if stopped is not None:
                _interrupted(record, stopped)
                raise stopped from None
            record.status = "failed"
            record.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            if timed is not None:
                record.stage_seconds[timed] = round(time.perf_counter() - clock, 3)
            record.ended_at = dt.datetime.now(dt.UTC)
            try:
                write_record(work, record)
            except (OSError, StoreUnreachable) as exc:
                # A job stopped by a full disk or a store that stopped answering: its error
                # says so; the record written on entry stays (`running`: listed as
                # interrupted once this process ends, or its lease on the store runs out).
                if error is None or not (disk_full(exc) or isinstance(exc, StoreUnreachable)):
                    raise
            finally:
                ACTIVE.pop(record.run_id, None)
                SETTLED.append((work, record))


def no_room(
    work: WorkDir, run_id: str, exc: BaseException, counts: dict[str, Any]
) -> Interrupted | None:
    """A full disk or a store that stopped answering, met by a run outside its judge stage's
    sending (remap, replay, report, artifacts, or before its first call), as the run's stop
    (exit 75, the resume command); None for any other error."""
    if isinstance(exc, StoreUnreachable):
        return StoreDown(run_id, str(exc), None, counts)
    if not disk_full(exc):
        return None
    assert isinstance(exc, OSError)
    name = Path(str(exc.filename)) if exc.filename else None
    where = describe_filesystem(name or work.root)
    return DiskFull(run_id, where, counts, judging=False, writing=str(name) if name else None)


def _stop_signal(exc: BaseException) -> int | None:
    """The signal `exc` stands for: SIGINT for Ctrl-C's KeyboardInterrupt, the signal of
    Prefect's TerminationSignal (raised by its SIGTERM handler inside a flow run); else None."""
    if isinstance(exc, KeyboardInterrupt):
        return signal.SIGINT
    signum = getattr(exc, "signal", None)
    if not isinstance(exc, Exception) and isinstance(signum, int):
        return signum
    return None


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
    return run_lock_is_free(work, run_id)


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
    folder under `runs/` whose name is not a run id (`tasks.runs.folder.is_run_id`) is
    `foreign`: no command made it, and every reader skips it.
    """
    good: list[RunEntry] = []
    damaged: list[RunEntry] = []
    foreign: list[RunEntry] = []
    runs = work.fresh("runs", pattern=f"*/{RECORD_FILE}")
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
            record = parse_record(path, run_id)
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


def resume_command(run_id: str, work: WorkDir | None = None) -> str:
    """The one command that takes an interrupted run up again, whatever stage it stopped in
    (`judgeline rerun-failed`: see `resume_kind`), with `work`'s address unless that is the
    default work dir."""
    import shlex

    from tasks.store.workdir import default_address

    where = "" if work is None or work.address == default_address() else work.address
    return f"judgeline {f'--work-dir {shlex.quote(where)} ' if where else ''}rerun-failed {run_id}"


ResumeKind = Literal["rerun", "nightly", "judge", "live", "import"]


def resume_kind(work: WorkDir, run_id: str) -> tuple[ResumeKind, RunRecord | None]:
    """How `rerun-failed` takes a run up again, and its record (None for a judge run made
    before runs had records):

    - `rerun`: its judge stage ended (`run.json` exists): send the calls with no stored
      reply, then rebuild remap, replay, record and report;
    - `nightly`, `judge`, `live`: it stopped earlier (killed, interrupted, no server): run its
      job again from its record's configuration under the same run id, which reuses every
      stored reply and sends only the rest;
    - `import`: an import that stopped; nothing was sent, so the import runs again.
    A run with neither a record nor a `run.json` is refused (InputError naming it)."""
    from schemas.config import RunConfig

    folder = RunFolder(work, run_id)
    record = read_record(work, run_id) if folder.record.exists() else None
    config = record.config if record is not None else {}
    if "import" in config:
        return "import", record
    if record is not None and ("live" in config or record.live is not None):
        return "live", record
    if folder.info.exists():
        return "rerun", record
    if record is None:
        read_record(work, run_id)  # raises: no run
        raise AssertionError("unreachable")
    if "plan_id" in config and "judges" in config:
        return "judge", record
    try:
        RunConfig.model_validate(config)
    except ValueError:
        return "rerun", record  # the rerun flow names what is missing
    return "nightly", record
