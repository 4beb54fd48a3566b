"""Stored plans: written once (gated, atomic), resolved by prefix, read and gated."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from schemas import PlanInfo, PresentationRow, conform
from tasks.errors import GateError, InputError, IntegrityError
from tasks.gates import gate_once
from tasks.ingest.manifest import MANIFEST_FILE, MANIFEST_INFO_FILE
from tasks.plan.files import PLAN_FILE, PLAN_ID, PLAN_INFO_FILE
from tasks.plan.gate import gate_plan
from tasks.storage import publish_folder_once, published_folders, read_stored_folder
from tasks.store.workdir import WorkDir


def _read_dir(folder: Path, name: str) -> tuple[PlanInfo, pa.Table]:
    """Read one stored plan folder without gating it; IntegrityError if unreadable."""
    return read_stored_folder(
        folder,
        kind="plan",
        name=name,
        info_file=PLAN_INFO_FILE,
        info_model=PlanInfo,
        id_field="plan_id",
        table_file=PLAN_FILE,
        row_model=PresentationRow,
    )


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([("pair_id", "ascending"), ("seed", "ascending"), ("order", "ascending")])


def _gate_stored(work: WorkDir, folder: Path, info: PlanInfo, table: pa.Table) -> None:
    """Gate the plan files in `folder` unless these exact bytes (and its manifest's) passed
    already (a staged plan's memo serves its published folder: same names, same bytes)."""
    manifest = work.manifest_dir(info.manifest_hash)
    stored = [folder / PLAN_FILE, folder / PLAN_INFO_FILE]
    stored += [manifest / MANIFEST_FILE, manifest / MANIFEST_INFO_FILE]
    gate_once(work.gate_memos, stored, lambda: gate_plan(info, table, work))


def _verify_existing(work: WorkDir, info: PlanInfo, table: pa.Table) -> PlanInfo:
    """A stored plan with this id must pass its gate and hold exactly these presentations."""
    folder = work.plan_dir(info.plan_id)
    stored_info, stored = _read_dir(folder, info.plan_id)
    try:
        _gate_stored(work, folder, stored_info, stored)
    except GateError as exc:
        raise IntegrityError(
            f"plan {info.plan_id}: the stored plan fails its gate and will not be overwritten.\n"
            f"{exc}"
        ) from exc
    if not _sorted(stored).equals(_sorted(table)):
        raise IntegrityError(f"plan {info.plan_id}: the stored presentations differ from a redraw")
    return stored_info


def write_plan(work: WorkDir, info: PlanInfo, table: pa.Table) -> PlanInfo:
    """Gate and store a plan once (atomic); if it is already stored, verify and return it."""
    table = conform(table, PresentationRow, where=f"plan {info.plan_id}")

    existing = publish_folder_once(
        work.plan_dir(info.plan_id),
        table=table,
        table_file=PLAN_FILE,
        info=info,
        info_file=PLAN_INFO_FILE,
        check=lambda staged: _gate_stored(work, staged, *_read_dir(staged, info.plan_id)),
        verify_existing=lambda: _verify_existing(work, info, table),
    )
    return info if existing is None else existing


def resolve_plan_id(work: WorkDir, prefix: str) -> str:
    """The stored plan id that `prefix` names uniquely."""
    prefix = prefix.strip().lower()
    root = work.fresh("plans", pattern=f"*/{PLAN_INFO_FILE}")
    names = [p.name for p in published_folders(root, PLAN_INFO_FILE)]
    if prefix in names:
        return prefix
    matches = [n for n in names if prefix and n.startswith(prefix)]
    if len(matches) != 1:
        what = "is ambiguous: " + ", ".join(matches) if matches else f"matches no plan in {root}"
        raise InputError(f"plan id {prefix!r} {what}")
    return matches[0]


def read_plan(work: WorkDir, plan_id: str, *, gate: bool = True) -> tuple[PlanInfo, pa.Table]:
    """Read a stored plan, conformed to PresentationRow, and (by default) gate it."""
    if not PLAN_ID.fullmatch(plan_id):
        raise InputError(f"{plan_id!r} is not a plan id (64 hex digits)")
    folder = work.plan_dir(plan_id)
    if not folder.is_dir():
        raise InputError(f"no plan {plan_id} in {work.location(folder.parent)}")
    info, table = _read_dir(folder, plan_id)
    if gate:
        _gate_stored(work, folder, info, table)
    return info, table


def list_plans(work: WorkDir) -> list[PlanInfo]:
    """The sidecars of every stored plan, oldest first."""
    infos = [
        _read_dir(f, f.name)[0] for f in published_folders(work.fresh("plans"), PLAN_INFO_FILE)
    ]
    return sorted(infos, key=lambda i: (i.created_at, i.plan_id))
