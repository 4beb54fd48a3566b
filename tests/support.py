"""Shared test code: a demo plan staged in a work dir, and copies of stored plans.

Importable from every test module (`pythonpath` in pyproject.toml puts tests/ on the path);
fixtures stay in conftest.py.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tasks.workdir import WorkDir

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow as pa

    from schemas import Pair

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@dataclass(frozen=True)
class StagedPlan:
    """A frozen manifest and its stored plan in one work dir."""

    work: WorkDir
    plan_id: str
    manifest: pa.Table
    presentations: pa.Table

    def copy_to(self, work: WorkDir) -> StagedPlan:
        """The same manifest and plan in `work`, whose cache starts empty."""
        copy_stored_plans(self.work, work)
        return replace(self, work=work)


def copy_stored_plans(source: WorkDir, target: WorkDir) -> None:
    """Copy the manifests and plans of `source` (not its cache or runs) into `target`."""
    for folder in ("manifests", "plans"):
        shutil.copytree(source.root / folder, target.root / folder)


def stage_demo_plan(work: WorkDir, *, pairs: int, k: int) -> StagedPlan:
    """Freeze the first `pairs` demo pairs in `work` and store their full grid with K = `k`."""
    # Imported here: most test modules never stage a plan and need not load these.
    from tasks.ingest.demo_benchmark import demo_pairs

    return stage_plan(work, "demo", demo_pairs()[:pairs], k=k)


def stage_plan(work: WorkDir, source: str, pairs: Sequence[Pair], *, k: int) -> StagedPlan:
    """Freeze `pairs` in `work` and store their full grid with K = `k`."""
    from tasks.ingest.manifest import freeze_manifest, read_manifest
    from tasks.plan import make_plan, read_plan, write_plan

    frozen = freeze_manifest([(source, list(pairs))], work)
    _, manifest = read_manifest(work, frozen.info.manifest_hash)
    info, table = make_plan(manifest, k, "full", None)
    write_plan(work, info, table)
    _, presentations = read_plan(work, info.plan_id)
    return StagedPlan(work, info.plan_id, manifest, presentations)
