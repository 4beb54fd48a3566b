"""Replay outputs: per-pair design metrics, per-pair policy rows and their summaries."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from schemas.arrow import ADDED_LATER
from schemas.vocabulary import Design, Policy


class DesignRow(BaseModel):
    """Per (judge, config, dataset, pair, design): the exact docs/design.md#design-metrics."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    pair_id: str
    design: Design
    expected_score: float
    p_neutral: float
    expected_agreement: float


class ReplayRow(BaseModel):
    """`replay.parquet`: one row per (judge, config, dataset, pair_id, design, policy)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    pair_id: str
    design: Design
    policy: Policy
    expected_calls: float
    p_change: float
    p_neutral_to_decisive: float
    p_decisive_to_neutral: float
    p_reversal: float
    expected_score: float
    reference_score: float
    added_variance: float
    expected_usd: float | None = Field(
        default=None,
        description="Expected USD: sum over the pair's calls of P(sent) x the call's price "
        "(tasks.replay.money); None without prices.",
        json_schema_extra=ADDED_LATER,
    )


class ComponentRow(BaseModel):
    """`components.parquet`: one nonadaptive component's (cost, agreement) per (judge, config,
    dataset, design); the cost to match is read off their upper concave envelope."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    design: Design
    component: str = Field(description="`k=1`..`k=K` random k-subsets, or `balanced pair`.")
    cost: float = Field(description="Calls the component executes.")
    agreement: float = Field(description="Mean P(component decision == reference decision).")


class SummaryRow(BaseModel):
    """`summary.parquet`: one row per (judge, config, dataset, design, policy)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    design: Design
    policy: Policy
    pairs: int
    expected_calls: float
    p_change: float
    p_neutral_to_decisive: float
    p_decisive_to_neutral: float
    p_reversal: float
    expected_score: float
    reference_score: float
    added_variance: float
    savings: float
    match_cost: float | None = None
    match_extra: float | None = None
    expected_usd: float | None = Field(
        default=None, description="Mean expected USD per pair.", json_schema_extra=ADDED_LATER
    )
    savings_usd: float | None = Field(
        default=None,
        description="1 - expected_usd / the full policy's, same design.",
        json_schema_extra=ADDED_LATER,
    )
