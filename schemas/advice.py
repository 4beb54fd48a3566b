"""`advice.parquet`: the stopping policy advised per judge configuration (docs/design.md#advice)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.report import Show
from schemas.vocabulary import Policy


class AdviceRow(BaseModel):
    """One candidate ranked for a (judge, config): the advised policy or the runner-up.

    Savings are 1 - calls / K per pair; change is `p_change`; both are means over the pairs
    of one half, with percentile bootstrap intervals over those pairs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    rank: Literal["advised", "runner_up"]
    policy: Policy | None = Field(description="Null when no policy of the family qualifies.")
    max_change: float = Field(description="The budget on the rate of changed decisions.")
    rng_seed: int = Field(description="Seed of the random halves and of the bootstrap.")
    level: float = Field(description="Coverage of every interval.")
    selection_pairs: int
    holdout_pairs: int
    selection_savings: float | None = None
    selection_savings_low: float | None = None
    selection_savings_high: float | None = None
    selection_change: float | None = None
    selection_change_low: float | None = None
    selection_change_high: float | None = None
    predicted_change_low: float | None = Field(
        default=None, description="Prediction interval for the change on another half."
    )
    predicted_change_high: float | None = None
    holdout_savings: float | None = None
    holdout_savings_low: float | None = None
    holdout_savings_high: float | None = None
    holdout_change: float | None = None
    holdout_change_low: float | None = None
    holdout_change_high: float | None = None
    note: str = Field(description="What the advice means, in one sentence.")


class AdviceTableRow(BaseModel):
    """The report's advice section: per judge configuration, the advised policy and the
    runner-up, with what they save and change on the selection and held-out halves."""

    judge: Annotated[str, Show("Judge")]
    config: Annotated[str, Show("Config")]
    rank: Annotated[str, Show("Rank")]
    policy: Annotated[str | None, Show("Policy")]
    max_change: Annotated[float, Show("change budget", "pct2")]
    selection_savings: Annotated[float | None, Show("savings", "pct", "selection half", True)]
    selection_change: Annotated[float | None, Show("change", "pct2", "selection half")]
    holdout_savings: Annotated[float | None, Show("savings", "pct", "held-out half", True)]
    holdout_change: Annotated[float | None, Show("change", "pct2", "held-out half")]
    note: Annotated[str, Show("What it means")]
