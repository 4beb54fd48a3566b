"""Live stopping: the recorded random draws, per-pair realised calls and decisions, summaries."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.vocabulary import Decision, Design, Identity, Order, Policy


class LiveDrawRow(BaseModel):
    """`live_draws.parquet`: one reference call of one pair, as drawn from the run's rng seed.

    Per pair the K rows are its balanced reference (K/2 seeds in `AB`, K/2 in `BA`), the
    perfect matching of `AB` seeds to `BA` seeds (the two rows of a couple share `couple`),
    and the order couples run in (`position`, 0 first). Every judge and config of the run
    uses the same draws, so they are compared on the same reference calls.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    pair_id: str
    seed: int = Field(ge=0)
    order: Order
    couple: int = Field(ge=0, description="Matched couple, 0..K/2-1 (numbered by AB seed).")
    position: int = Field(ge=0, description="Place of the couple in execution order, 0 first.")


class LivePairRow(BaseModel):
    """`live.parquet`: what the live run executed and decided for one pair and judge config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    pair_id: str
    realised_calls: int = Field(ge=0, description="Calls executed (failed calls included).")
    stopped_early: bool = Field(description="The first couple was decisive and unanimous.")
    decision: Decision
    key: Identity | None = None


class LiveSummaryRow(BaseModel):
    """`live_summary.parquet`: realised cost of the live policy per (judge, config, dataset)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    design: Design
    policy: Policy
    pairs: int
    stopped_early: int = Field(description="Pairs that stopped after their first couple.")
    realised_calls: int
    planned_calls: int = Field(description="K per pair: the full reference.")
    realised_savings: float = Field(description="1 - realised_calls / planned_calls.")
