"""The run builder: judgment files of one judge -> manifest, plan, cached replies, calls.

Each file is one seed (files in the order given: seed 0, 1, ...), each judgment one call of
the full grid placed by the display order its format reader derived. Replies enter the cache
under an import key (never a sendable call key) with provider `imported:<tool>`, and their
source file and line go to `cache/imported/` and the run's `imported.parquet`. Nothing is
sent and nothing counts as paid: the run's counts say `sent: 0`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from schemas import CallRecord, PlanInfo, ReplyRecord, rows_to_table
from schemas.imports import IMPORTED_PROVIDER_PREFIX, ImportedReplyRecord
from schemas.manifest import Pair
from schemas.run import RunInfo
from tasks.errors import InputError
from tasks.hashing import digest, sha256_text
from tasks.imports.records import ImportedFile
from tasks.ingest.fields import shorten
from tasks.runs.folder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.store.workdir import WorkDir

__all__ = ["IMPORT_KEY_FORMAT", "ImportedRun", "build_import", "check_files", "imported_table"]

IMPORT_KEY_FORMAT = "judgeline-import-v1"
"""First part of an imported reply's key: it can never equal a sent call's key."""


@dataclass(frozen=True)
class ImportedRun:
    """What the builder stored for one import: the run's ids, its K and its counts."""

    run_id: str
    manifest_hash: str
    plan_id: str
    k: int
    counts: dict[str, Any]
    imported: dict[str, Any]


def _check_same_judge(files: list[ImportedFile]) -> None:
    first = files[0]
    for other in files[1:]:
        for attr in ("tool", "judge", "config", "template_id"):
            if getattr(other, attr) != getattr(first, attr):
                raise InputError(
                    f"the files of one import are repeated runs of one judge: {attr} is "
                    f"{getattr(other, attr)!r} here but {getattr(first, attr)!r} in {first.path}",
                    file=str(other.path),
                )
        # The lines of repeated runs may come in any order (JudgeBench writes them as calls
        # finish): the pairs are compared by pair_id.
        mine = {p.pair_id: p for p in other.pairs.pairs}
        theirs = {p.pair_id: p for p in first.pairs.pairs}
        if mine != theirs:
            raise InputError(_pairs_differ(mine, theirs, first.path), file=str(other.path))


def _pairs_differ(mine: dict[str, Pair], theirs: dict[str, Pair], first: Path) -> str:
    """What differs between a file's pairs (`mine`) and the first file's, in one paragraph:
    the pairs only one file has, or the fields that differ and their two values."""
    only_here = sorted(mine.keys() - theirs.keys())
    only_there = sorted(theirs.keys() - mine.keys())
    fields: dict[str, tuple[str, Any, Any]] = {}  # field -> (first pair_id, here, there)
    for key in sorted(mine.keys() & theirs.keys()):
        a, b = mine[key].model_dump(), theirs[key].model_dump()
        for name in a:
            if a[name] != b[name] and name not in fields:
                fields[name] = (key, a[name], b[name])
    parts = []
    if only_here:
        parts.append(f"pair_id {', '.join(only_here[:3])} only here")
    if only_there:
        parts.append(f"pair_id {', '.join(only_there[:3])} only in {first}")
    for name, (key, here, there) in fields.items():
        parts.append(
            f"{name} of pair {key} is {shorten(here)} here but {shorten(there)} in {first}"
        )
    text = (
        "repeated runs must judge the same pairs (in any order), but "
        + "; ".join(parts)
        + (" (and more)" if len(only_here) > 3 or len(only_there) > 3 else "")
    )
    if "dataset" in fields:
        text += (
            ". The dataset name comes from each file's name: give all the files one name "
            "with `--dataset NAME`"
        )
    return text


def _check_distinct(files: list[ImportedFile]) -> None:
    """Each file is one run: the same bytes given twice would count one run's judgments as two
    seeds (and the replay would report savings over copies)."""
    seen: dict[tuple[str, int], Path] = {}
    for file in files:
        first = seen.get((file.sha256, file.part))
        if first is not None:
            same = "the same file" if first == file.path else f"the same file as {first}"
            raise InputError(
                f"{same} (SHA-256 {file.sha256[:12]}...) is given twice: each file is one "
                "repeated run of the judge (one seed), so a copy would count one run's "
                "judgments twice; give each run's file once",
                file=str(file.path),
            )
        seen[(file.sha256, file.part)] = file.path


def check_files(files: list[ImportedFile]) -> None:
    """Refuse files that cannot make one run: none, the same file twice, not one judge's
    repeated runs of the same pairs, or a pair judged twice in one order of one file
    (`build_import` checks too)."""
    if not files:
        raise InputError("give at least one judgment file to import")
    _check_distinct(files)
    _check_same_judge(files)
    for file in files:
        seen: set[tuple[str, str]] = set()
        for j in file.judgments:
            if (j.pair_id, j.order) in seen:
                raise InputError(
                    f"pair {j.pair_id} is judged twice in order {j.order}", file=str(file.path),
                    row=j.line,
                )  # fmt: skip
            seen.add((j.pair_id, j.order))


def _template_hash(template_id: str) -> str:
    from tasks.prompts.templates import TEMPLATES

    template = TEMPLATES.get(template_id)
    return template.template_hash if template is not None else sha256_text(template_id)


def build_import(work: WorkDir, files: list[ImportedFile], run_id: str) -> ImportedRun:
    """Freeze, plan and store one import as run `run_id` (its calls table and run.json)."""
    from tasks.ingest.manifest import freeze_manifest, read_manifest
    from tasks.judging.cache import stored_keys, write_replies
    from tasks.plan.designs import plan_full_grid, plan_id_of
    from tasks.plan.store import write_plan

    check_files(files)
    first = files[0]
    frozen = freeze_manifest([(str(first.path), first.pairs.pairs, first.pairs.rows)], work)
    manifest_hash = frozen.info.manifest_hash
    _, manifest = read_manifest(work, manifest_hash)
    k = len(files)
    grid = plan_full_grid(manifest, k, imported=True)
    plan_id = plan_id_of(manifest_hash, k, "full", None)
    info = PlanInfo(
        plan_id=plan_id,
        manifest_hash=manifest_hash,
        k=k,
        design="full",
        rng_seed=None,
        pairs=manifest.num_rows,
        presentations=grid.num_rows,
        created_at=dt.datetime.now(dt.UTC),
    )
    write_plan(work, info, grid)

    pres = {
        (r["pair_id"], r["seed"], r["order"]): r["presentation_id"]
        for r in grid.select(["pair_id", "seed", "order", "presentation_id"]).to_pylist()
    }
    rows = manifest.select(["pair_id", "dataset", "answer_a_sha256", "answer_b_sha256"])
    pairs = {r["pair_id"]: r for r in rows.to_pylist()}
    provider = IMPORTED_PROVIDER_PREFIX + first.tool
    template_hash = _template_hash(first.template_id)
    now = dt.datetime.now(dt.UTC)
    calls: list[CallRecord] = []
    replies: list[ReplyRecord] = []
    sources: list[ImportedReplyRecord] = []
    for seed, file in enumerate(files):
        for j in file.judgments:
            cell = (j.pair_id, seed, j.order)
            pair = pairs[j.pair_id]
            left, right = ("a", "b") if j.order == "AB" else ("b", "a")
            key = digest(
                IMPORT_KEY_FORMAT, file.tool, file.judge, file.config, file.template_id,
                j.source_sha256 or file.sha256, j.line, j.index, j.pair_id, seed, j.order,
            )  # fmt: skip
            calls.append(
                CallRecord(
                    run_id=run_id,
                    judge=file.judge,
                    config=file.config,
                    dataset=pair["dataset"],
                    presentation_id=pres[cell],
                    call_key=key,
                    provider=provider,
                    model=file.judge,
                    template_id=file.template_id,
                    template_hash=template_hash,
                    seed=seed,
                    left_sha256=pair[f"answer_{left}_sha256"],
                    right_sha256=pair[f"answer_{right}_sha256"],
                    status="stored" if j.reply is not None else "failed",
                )  # fmt: skip
            )
            sources.append(
                ImportedReplyRecord(
                    call_key=key,
                    tool=file.tool,
                    source_file=str(j.source or file.path),
                    source_sha256=j.source_sha256 or file.sha256,
                    source_line=j.line,
                    judgment=j.index,
                    recorded_verdict=j.recorded_verdict,
                    recorded_label=j.recorded_label,
                    imported_at=now,
                )  # fmt: skip
            )
            if j.reply is not None:
                replies.append(
                    ReplyRecord(
                        call_key=key,
                        provider=provider,
                        model=file.judge,
                        raw_reply=j.reply,
                        latency_ms=0.0,
                        received_at=now,
                    )  # fmt: skip
                )
    have = stored_keys(work)
    fresh = [r for r in replies if r.call_key not in have]
    write_replies(work, fresh)
    source_table = rows_to_table(sources, ImportedReplyRecord)
    if fresh:
        write_parquet_atomic(
            source_table, work.imported / f"{run_id}-{sha256_text(run_id)[:8]}.parquet"
        )
    folder = RunFolder(work, run_id).create()
    write_parquet_atomic(rows_to_table(calls, CallRecord), folder.calls, overwrite=True)
    write_parquet_atomic(source_table, folder.table("imported"), overwrite=True)
    counts = {
        "planned": grid.num_rows,
        "stored": len(replies),
        "failed": len(calls) - len(replies),
        "sent": 0,
        "imported": len(replies),
        "not_in_files": grid.num_rows - len(calls),
    }
    imported = {
        "tool": first.tool,
        "judge": first.judge,
        "config": first.config,
        "template": first.template_id,
        "convention": first.convention,
        "files": [
            {"path": str(f.path), "sha256": f.sha256, "seed": s} for s, f in enumerate(files)
        ],
    }
    folder.write_info(
        RunInfo(
            run_id=run_id,
            plan_id=plan_id,
            manifest_hash=manifest_hash,
            template_id=first.template_id,
            template_hash=template_hash,
            judges=[{"name": first.judge, "configs": [first.config], "imported": first.tool}],
            updated_at=now.isoformat(),
            counts=counts,
        )  # fmt: skip
    )
    return ImportedRun(run_id, manifest_hash, plan_id, k, counts, imported)


def imported_table(work: WorkDir, run_id: str) -> pa.Table | None:
    """A run's `imported.parquet` (where each reply came from), None for a run judgeline made."""
    import pyarrow.parquet as pq

    path = RunFolder(work, run_id).table("imported")
    return pq.read_table(path) if path.is_file() else None
