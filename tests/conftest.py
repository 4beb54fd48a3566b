"""Shared fixtures: an isolated Prefect home, the shared data folder, a temporary work dir,
and a stored demo plan to copy into it."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import pyarrow as pa

# Prefect creates its home at import time: isolate it before anything imports prefect.
_PREFECT_HOME = Path(tempfile.mkdtemp(prefix="judgeline-prefect-"))
os.environ["PREFECT_HOME"] = str(_PREFECT_HOME)
os.environ["PREFECT_RESULTS_LOCAL_STORAGE_PATH"] = str(_PREFECT_HOME / "results")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

from tasks.workdir import WorkDir  # noqa: E402

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


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real benchmark files; tests skip with a clear message only if absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data folder {SHARED_DATA} is absent")
    return SHARED_DATA


@pytest.fixture
def work(tmp_path: Path) -> WorkDir:
    """A fresh, empty work directory."""
    return WorkDir(tmp_path / "work")


@pytest.fixture(scope="session")
def prefect_harness():  # type: ignore[no-untyped-def]
    """One Prefect test database for the whole session (entering it costs ~11 s)."""
    from prefect.testing.utilities import prefect_test_harness

    # A loaded 2-core machine can need more than the default 30 s to start the server.
    with prefect_test_harness(server_startup_timeout=120):
        yield
