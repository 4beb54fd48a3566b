"""The plan job as one plain function: a stored manifest in, a stored and gated plan out;
shared by the `plan` command and the plan-orders flow."""

from __future__ import annotations

import secrets

from schemas.plan import PlanInfo
from schemas.vocabulary import DESIGNS
from tasks.ingest.manifest import read_manifest
from tasks.plan.designs import make_plan
from tasks.plan.store import read_plan, write_plan
from tasks.store.workdir import WorkDir

__all__ = ["draw_rng_seed", "plan_orders"]


def draw_rng_seed(design: str, rng_seed: int | None) -> int | None:
    """The given seed, or for a drawn design without one a fresh random seed (recorded in
    the plan's sidecar, so the draw stays reproducible)."""
    if design in DESIGNS and rng_seed is None:
        return secrets.randbits(31)
    return rng_seed


def plan_orders(
    work: WorkDir, manifest_hash: str, k: int, design: str, rng_seed: int | None
) -> PlanInfo:
    """Read the gated manifest, build the plan, store it and read it back gated."""
    _, manifest = read_manifest(work, manifest_hash)
    info, table = make_plan(manifest, k, design, rng_seed)
    plan_id = write_plan(work, info, table).plan_id
    stored, _ = read_plan(work, plan_id)
    return stored
