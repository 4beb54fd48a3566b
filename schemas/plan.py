"""The trusted presentation map: which identity sits in which slot for every planned call."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from schemas.vocabulary import Identity, Order, PlanDesign


class PresentationRow(BaseModel):
    """One planned presentation (pair, seed, order). Only the evaluator writes these."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    presentation_id: str = Field(description="Hash of (manifest hash, pair, seed, order).")
    plan_id: str = Field(description="The plan this presentation belongs to.")
    manifest_hash: str
    pair_id: str
    seed: int = Field(ge=0, description="Seed index s in 0..K-1.")
    order: Order
    left_identity: Identity
    right_identity: Identity


class PlanInfo(BaseModel):
    """Sidecar of a stored plan (`plan.json`)."""

    model_config = ConfigDict(extra="forbid")

    plan_id: str = Field(description="Hash of (manifest hash, K, design, rng seed).")
    manifest_hash: str
    k: int = Field(
        ge=1, description="Seeds per pair; even, except in an imported run (one per file)."
    )
    design: PlanDesign = Field(description="`full` grid (2K per pair) or one drawn design (K).")
    rng_seed: int | None = Field(default=None, description="Seed of the draw; None for `full`.")
    pairs: int
    presentations: int
    created_at: dt.datetime
