"""`advice.parquet`: the stopping policy advised per judge configuration (docs/design.md#advice)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.report import Show
from schemas.vocabulary import Policy

Certificate = Literal["construction", "certified", "over", "untested"]
"""Why a policy may or may not be advised (docs/design.md#certificates):
`construction`: no pair can change more decisions than the budget (R <= budget);
`certified`: the test of "changes at least the budget" rejected at the advice's level;
`over`: it did not; `untested`: an earlier change law of the fixed sequence was not certified."""
Rank = Literal["advised", "runner_up", "candidate", "other"]
"""`candidate`: the policy that saves most among those not certified whose change on these
pairs is below the budget (the one more pairs could certify); `other`: any other."""


class AdviceRow(BaseModel):
    """One policy of the family for one (judge, config): savings and change over all its
    pairs, the upper bound on its true change rate and whether it is certified."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    policy: Policy
    rank: Rank
    max_change: float = Field(description="The budget on the rate of changed decisions.")
    level: float = Field(description="Confidence of the certificates, family-wise.")
    pairs: int = Field(description="Pairs of the judge configuration, every dataset.")
    savings: float = Field(description="Mean of 1 - expected calls / K over the pairs.")
    change: float = Field(description="Mean p_change over the pairs.")
    reversal: float = Field(description="Mean p_reversal over the pairs (A to B or B to A).")
    change_range: float = Field(description="The most any one pair can change (R).")
    change_bound: float = Field(
        description="Upper confidence bound (at `level`) on the true change rate."
    )
    certificate: Certificate
    pairs_needed: int | None = Field(
        default=None,
        description="About how many pairs changing decisions as these do would certify it "
        "(null when certified, or when its change is not below the budget).",
    )
    note: str = Field(description="What the row means, in one sentence.")


class AdviceTableRow(BaseModel):
    """The report's advice section: per judge configuration the advised policy, the
    runner-up and the best candidate not certified, with bound and certificate."""

    judge: Annotated[str, Show("Judge")]
    config: Annotated[str, Show("Config")]
    rank: Annotated[str, Show("Rank")]
    policy: Annotated[str, Show("Policy")]
    pairs: Annotated[int, Show("pairs", "int")]
    savings: Annotated[float, Show("savings", "pct", "calls", True)]
    change: Annotated[float, Show("observed", "pct2", "changed decisions")]
    change_bound: Annotated[float, Show("bound", "pct2", "changed decisions")]
    max_change: Annotated[float, Show("budget", "pct2", "changed decisions")]
    certificate: Annotated[str, Show("certificate")]
    pairs_needed: Annotated[int | None, Show("pairs to certify", "int")]
    note: Annotated[str, Show("What it means")]
