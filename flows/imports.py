"""Imported runs: judgment files -> run -> remap -> (replay when K allows) -> report; and
re-parsing a run from its cached replies. Neither sends a call.

Both flows are async, though nothing in them awaits: Prefect's engine for a sync flow joins
the flow run's heartbeat thread at its end, and that thread sleeps in steps of a second, so
a sync flow run ended up to 1 s (0.5 s on average) after its work did."""

from __future__ import annotations

from typing import Any

from flows.remap import remap_stage
from flows.replay import replay_stage
from flows.report import report_task
from flows.runtime import flow
from schemas.run import RunRecord
from schemas.vocabulary import DESIGNS, POLICIES
from tasks.runs.folder import RunFolder, check_run_id
from tasks.runs.health import raise_unless_completed
from tasks.runs.jobs import (
    check_import_id,
    new_record,
    recorded_run,
    rerecorded_run,
    settle_status,
)
from tasks.runs.record import new_run_id, outcome_counts, write_record
from tasks.store.workdir import WorkDir


def no_replay_reason(k: int) -> str | None:
    """Why an imported run of K seeds is not replayed (None: it is)."""
    if k >= 2 and k % 2 == 0:
        return None
    if k == 1:
        return (
            "not replayed: K = 1 (one file: each pair judged once in each order). Stopping "
            "policies choose among the K judgments of each order, so they need an even K >= 2: "
            "import the files of repeated runs of this judge, one file per run, to replay them"
        )
    return (
        f"not replayed: K = {k} (one file per run) is odd. Stopping policies need an even K "
        "(balanced references use K/2 seeds in each order): import one run's file more or fewer"
    )


def _finish(work: WorkDir, record: RunRecord, k: int) -> None:
    """Agreement with the files, the replay when K allows, the report; record updated."""
    import pyarrow.parquet as pq

    from tasks.imports import agreement, import_summary, imported_table

    folder = RunFolder(work, record.run_id)
    record.outcomes = outcome_counts(folder)
    table = imported_table(work, record.run_id)
    if table is not None and record.imported is not None:
        record.imported["agreement"] = agreement(
            table, pq.read_table(folder.table("labels")), pq.read_table(folder.calls)
        )
        record.imported["summary"] = import_summary(folder)
        record.imported["replay"] = no_replay_reason(k)
    if no_replay_reason(k) is None:
        replay_stage(str(folder.outcomes), str(folder.path), list(DESIGNS), list(POLICIES))
    record.report = report_task(work.address, record.run_id)


@flow(name="import-judgments")
async def import_flow(
    fmt: str, paths: list[str], work_dir: str | None = None, run_id: str | None = None,
    dataset: str | None = None, name: str | None = None, questions: str | None = None,
    answers_dir: str | None = None, mapping: str | None = None, judge: str | None = None,
    template: str = "arena-hard-v1", baseline: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Import the judgment files of one judge (one per seed) as a run; returns its record.
    A run whose health is degraded or failed (judgments recorded without a reply) ends this
    flow run Failed, as a judged run does.

    `questions`/`answers_dir` are FastChat's text files; `mapping`, `judge` and `template`
    read a judgments table; `baseline` names an Arena-Hard folder's baseline (v0.1)."""
    from tasks.imports import (
        ImportOptions,
        build_import,
        check_files,
        import_config,
        read_files,
    )

    if run_id is not None:
        check_run_id(run_id)  # before any file is read
    work = WorkDir.at(work_dir)
    options = ImportOptions(dataset, questions, answers_dir, mapping, judge, template, baseline)
    files = read_files(fmt, paths, options)
    check_files(files)  # before any record is written: a refused import leaves no entry
    config = import_config(fmt, paths, files)
    if run_id is not None:
        check_import_id(work, run_id, config)  # an import never replaces a finished run
    record = new_record(run_id or new_run_id(), name or f"import {fmt}", config)
    with recorded_run(work, record, timed="import"):
        built = build_import(work, files, record.run_id)
        record.manifest_hash, record.plan_id = built.manifest_hash, built.plan_id
        record.calls, record.imported = built.counts, built.imported
        write_record(work, record)  # the report reads the run's calls and files from it
        remap_stage(record.run_id, work.address)
        _finish(work, record, built.k)
        settle_status(work, record)
    result = record.model_dump(mode="json")
    raise_unless_completed(record.run_id, record.status, record.health, result)
    return result


@flow(name="reparse-run")
async def reparse_flow(run_id: str, work_dir: str | None = None) -> dict[str, Any]:
    """Re-label a run from its cached replies under the current parser and rebuild its
    outcomes, dispositions, replay, report and status, holding the run's lock. Sends
    nothing; a run still degraded or failed ends this flow run Failed."""
    from tasks.plan import read_plan

    work = WorkDir.at(work_dir)
    with rerecorded_run(work, run_id, timed="reparse") as record:
        before = _labels(work, run_id)
        counts = remap_stage(run_id, work.address)
        k = read_plan(work, record.plan_id)[0].k if record.plan_id else 0
        _finish(work, record, k if record.live is None else 0)
        settle_status(work, record)
    after = _labels(work, run_id)
    changed = sorted(key for key, label in after.items() if before.get(key, label) != label)
    counts["relabelled"] = len(changed)
    counts["relabelled_keys"] = changed
    raise_unless_completed(run_id, record.status, record.health, counts)
    return counts


def _labels(work: WorkDir, run_id: str) -> dict[str, str]:
    """The label per call key of a run's labels table (empty if none)."""
    import pyarrow.parquet as pq

    path = RunFolder(work, run_id).table("labels")
    if not path.is_file():
        return {}
    rows = pq.read_table(path, columns=["call_key", "label"]).to_pylist()
    return {r["call_key"]: r["label"] for r in rows}
