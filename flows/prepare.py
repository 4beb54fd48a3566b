"""Flows freeze-manifest and plan-orders: load sources, freeze and gate, then plan and gate.

The jobs themselves are plain functions (`tasks.ingest.sources`, `tasks.plan.orders`),
which the `freeze` and `plan` commands call without a flow run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from tasks.errors import InputError
from tasks.ingest.sources import load_source_dict, source_label
from tasks.plan.orders import draw_rng_seed
from tasks.store.workdir import WorkDir

if TYPE_CHECKING:
    from tasks.ingest.fields import LoadedPairs
    from tasks.ingest.manifest import SourcePairs


# Manifests and plans are content-addressed by us, so Prefect's result cache stays off.
# Tasks return ids, not pydantic models: Prefect 3.9's result tracking fails on a returned
# model ("'dict' object is not callable" in visit_collection).
@task(name="load-source", cache_policy=NO_CACHE)
def load_source_task(source: dict[str, Any]) -> LoadedPairs:
    """Load one source's pairs, with the file row of each, through the dataset loaders."""
    return load_source_dict(source)


@task(name="freeze", cache_policy=NO_CACHE)
def freeze_task(sources: list[SourcePairs], work_dir: str) -> str:
    """Validate and store the manifest (gated before it is published); returns its hash."""
    from tasks.ingest.manifest import freeze_manifest

    frozen = freeze_manifest(sources, WorkDir.at(work_dir))
    logger = get_run_logger()
    for warning in frozen.warnings:
        logger.warning(warning)
    state = "already frozen" if frozen.already_frozen else "frozen"
    logger.info("manifest %s %s at %s", frozen.info.manifest_hash, state, frozen.path)
    return frozen.info.manifest_hash


@task(name="gate-manifest", cache_policy=NO_CACHE)
def gate_manifest_task(manifest_hash: str, work_dir: str) -> None:
    """Read the stored manifest back and run its gate, as every later stage will."""
    from tasks.ingest.manifest import read_manifest

    read_manifest(WorkDir.at(work_dir), manifest_hash)


@task(name="plan", cache_policy=NO_CACHE)
def plan_task(manifest_hash: str, k: int, design: str, rng_seed: int | None, work_dir: str) -> str:
    """Read the gated manifest, build the plan and store it (gated before publishing)."""
    from tasks.ingest.manifest import read_manifest
    from tasks.plan import make_plan, write_plan

    work = WorkDir.at(work_dir)
    _, manifest = read_manifest(work, manifest_hash)
    info, table = make_plan(manifest, k, design, rng_seed)
    return write_plan(work, info, table).plan_id


@task(name="gate-plan", cache_policy=NO_CACHE)
def gate_plan_task(plan_id: str, work_dir: str) -> None:
    """Read the stored plan back and run its gate."""
    from tasks.plan import read_plan

    read_plan(WorkDir.at(work_dir), plan_id)


def freeze_stage(sources: list[dict[str, Any]], work_dir: str | None = None) -> str:
    """Freeze the pairs of `sources` (dicts of kind, path, mapping, dataset) as one manifest."""
    if not sources:
        raise InputError("no sources to freeze: give at least one")
    root = str(WorkDir.at(work_dir).root)
    loaded: list[SourcePairs] = []
    for source in sources:
        read = load_source_task(source)
        loaded.append((source_label(source), read.pairs, read.rows))
    manifest_hash = freeze_task(loaded, root)
    gate_manifest_task(manifest_hash, root)
    return manifest_hash


def plan_stage(
    manifest_hash: str,
    k: int = 4,
    design: str = "full",
    rng_seed: int | None = None,
    work_dir: str | None = None,
) -> str:
    """Plan display orders for a stored manifest: the full grid or one drawn design."""
    drawn = draw_rng_seed(design, rng_seed)
    if drawn != rng_seed:
        get_run_logger().info("design %s: drew rng seed %d", design, drawn)
    root = str(WorkDir.at(work_dir).root)
    plan_id = plan_task(manifest_hash, k, design, drawn, root)
    gate_plan_task(plan_id, root)
    return plan_id
