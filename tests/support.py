"""Shared test code: a demo plan staged in a work dir, and copies of stored plans.

Importable from every test module (`pythonpath` in pyproject.toml puts tests/ on the path);
fixtures stay in conftest.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tasks.workdir import WorkDir

if TYPE_CHECKING:
    import pyarrow as pa

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
    from tasks.ingest.manifest import freeze_manifest, read_manifest
    from tasks.plan import make_plan, read_plan, write_plan

    frozen = freeze_manifest([("demo", demo_pairs()[:pairs])], work)
    _, manifest = read_manifest(work, frozen.info.manifest_hash)
    info, table = make_plan(manifest, k, "full", None)
    write_plan(work, info, table)
    _, presentations = read_plan(work, info.plan_id)
    return StagedPlan(work, info.plan_id, manifest, presentations)


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder` as a read-only path, for as long as the block runs.

    A non-root user gets the folder's tree with its write bits removed (and back after);
    root, which ignores them, a read-only bind mount of it (in /tmp, unmounted after). The
    test is skipped where neither is possible (root without the right to mount).
    """
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")]}
        for path, mode in modes.items():
            path.chmod(mode & ~0o222)
        try:
            yield folder
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    target = Path(tempfile.mkdtemp(prefix="judgeline-ro-"))
    mounted = subprocess.run(
        ["sh", "-c", f'mount --bind "{folder}" "{target}" && mount -o remount,bind,ro "{target}"'],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        subprocess.run(["umount", str(target)], capture_output=True)
        target.rmdir()
        pytest.skip(f"cannot make a read-only view as root here: {mounted.stderr.strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", str(target)], check=True)
        target.rmdir()
