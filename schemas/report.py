"""The report's rows: the frames it reads and the tables it shows, with each column's heading.

Input models name the columns a report frame must have (in order). Table models declare the
columns of one report table, in display order; each field carries a `Show` saying how its
values read (`kind`), the heading above it (`label`) and the group heading it falls under.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict

Kind = Literal["text", "int", "pct", "pct2", "score", "calls", "extra", "var", "usd"]
"""How a column's values read: text, a count, a percentage, a score, calls, a change, USD."""


@dataclass(frozen=True)
class Show:
    """How one table column is headed and how its values read."""

    label: str
    kind: Kind = "text"
    group: str = ""
    bar: bool = False
    tip: str = ""
    optional: bool = False
    """Shown only when the frame has the column (the warehouse adds it; tests may not)."""


# ------------------------------------------------------------------ frames the report reads


class ScoreRow(BaseModel):
    """Decision score with its 95% interval per (judge, config, dataset, design, policy)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    design: str
    policy: str
    score: float | None  # None: the group has no valid outcome
    ci_low: float | None
    ci_high: float | None
    pairs: int


class PositionBiasRow(BaseModel):
    """Two-order conflicts per group and the slot that won both orders."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    conflicts: int
    left_left: int
    right_right: int


class RealisedRow(BaseModel):
    """A live run's realised calls and savings per group and policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge: str
    config: str
    dataset: str
    policy: str
    realised_calls: int
    planned_calls: int
    realised_savings: float


# ------------------------------------------------------------------ tables the report shows

_CALLS, _DISP, _RIGHT = "Calls (slots)", "Two-order dispositions", "Correctness"


class _Keyed(BaseModel):
    """The (judge, config, dataset) columns every table starts with."""

    judge: Annotated[str, Show("Judge")]
    config: Annotated[str, Show("Config")]
    dataset: Annotated[str, Show("Dataset")]


class DisclosureTableRow(_Keyed):
    """Disclosure: slot outcomes, two-order dispositions and correctness, kept apart."""

    planned: Annotated[int, Show("planned", "int", _CALLS)]
    valid: Annotated[int, Show("valid", "int", _CALLS, tip="A, B or T")]
    missing: Annotated[int, Show("missing", "int", _CALLS)]
    invalid: Annotated[int, Show("invalid", "int", _CALLS)]
    abstained: Annotated[int, Show("abstained", "int", _CALLS)]
    tied: Annotated[int, Show("tied", "int", _CALLS)]
    conflicting: Annotated[int, Show("conflicting", "int", _DISP, tip="order_conflict")]
    mixed: Annotated[int, Show("mixed", "int", _DISP)]
    stable: Annotated[int, Show("stable", "int", _DISP, tip="stable_A or stable_B")]
    stable_tie: Annotated[int, Show("stable tie", "int", _DISP)]
    incomplete: Annotated[int, Show("incomplete", "int", _DISP)]
    consistency: Annotated[float | None, Show("consistency", "pct", _DISP, bar=True)]
    stable_correct: Annotated[int, Show("stable correct", "int", _RIGHT)]
    stable_wrong: Annotated[int, Show("stable wrong", "int", _RIGHT, tip="consistent but wrong")]
    accuracy_of_stable: Annotated[float | None, Show("accuracy of stable", "pct", _RIGHT, bar=True)]


class ScoresTableRow(_Keyed):
    """Scores: one row per design and policy."""

    design: Annotated[str, Show("Design")]
    policy: Annotated[str, Show("Policy")]
    pairs: Annotated[int, Show("pairs", "int")]
    score: Annotated[float | None, Show("score", "score")]
    ci_low: Annotated[float | None, Show("95% low", "score")]
    ci_high: Annotated[float | None, Show("95% high", "score")]


class PolicyTableRow(_Keyed):
    """Cost versus agreement: each policy's calls, savings, changes and cost to match."""

    design: Annotated[str, Show("Design")]
    policy: Annotated[str, Show("Policy")]
    pairs: Annotated[int, Show("pairs", "int")]
    expected_calls: Annotated[float, Show("expected calls", "calls")]
    savings: Annotated[float, Show("savings", "pct", bar=True)]
    p_change: Annotated[float, Show("decisions changed", "pct2")]
    match_cost: Annotated[float | None, Show("cost to match", "calls")]
    match_extra: Annotated[float | None, Show("extra to match", "extra")]
    expected_score: Annotated[float, Show("expected score", "score")]
    reference_score: Annotated[float, Show("reference score", "score")]
    added_variance: Annotated[float, Show("added variance", "var")]


class BiasTableRow(_Keyed):
    """Position bias: order conflicts and the share each slot won both times."""

    conflicts: Annotated[int, Show("order conflicts", "int")]
    left_left: Annotated[int, Show("Left won both", "int")]
    right_right: Annotated[int, Show("Right won both", "int")]
    left_share: Annotated[float | None, Show("Left share", "pct", bar=True)]
    right_share: Annotated[float | None, Show("Right share", "pct", bar=True)]
    left_share_of_decisive: Annotated[
        float | None,
        Show(
            "Left among all decisive",
            "pct",
            tip="share of all decisive calls won by the left slot",
            optional=True,
        ),
    ] = None


class DesignsTableRow(_Keyed):
    """Reference designs: pairs, then `DESIGN_METRICS` per design, then the share captured."""

    pairs: Annotated[int, Show("pairs", "int")]
    captured: Annotated[
        float | None,
        Show(
            "share captured",
            "pct",
            "Independent",
            tip="(independent − common) / (balanced − common) agreement",
            optional=True,
        ),
    ] = None


class SpendTableRow(BaseModel):
    """Money spent: tokens and USD per judge config, sent calls only (`schemas.cost.SpendRow`)."""

    judge: Annotated[str, Show("Judge")]
    config: Annotated[str, Show("Config")]
    sent_calls: Annotated[int, Show("sent", "int", "Calls")]
    cached_calls: Annotated[int, Show("cached (free)", "int", "Calls")]
    prompt_tokens: Annotated[int, Show("prompt", "int", "Tokens")]
    cached_prompt_tokens: Annotated[
        int, Show("cached prompt", "int", "Tokens", tip="read from the provider's prompt cache")
    ]
    cache_write_tokens: Annotated[
        int, Show("cache writes", "int", "Tokens", tip="written to the provider's prompt cache")
    ]
    completion_tokens: Annotated[int, Show("completion", "int", "Tokens")]
    reasoning_tokens: Annotated[int, Show("reasoning", "int", "Tokens")]
    usd: Annotated[float | None, Show("USD", "usd", "Money")]
    prompt_cache_saved_usd: Annotated[
        float | None,
        Show(
            "saved by prompt cache",
            "usd",
            "Money",
            tip="the same tokens without the provider's prompt cache, less USD",
        ),
    ]
    price_as_of: Annotated[str, Show("price as of", "text", "Money")]


class SavingsUsdTableRow(_Keyed):
    """Expected money per policy: savings in calls and in USD, per pair (replay summary)."""

    design: Annotated[str, Show("Design")]
    policy: Annotated[str, Show("Policy")]
    savings: Annotated[float, Show("calls saved", "pct", "Savings", bar=True)]
    savings_usd: Annotated[float | None, Show("USD saved", "pct", "Savings", bar=True)]
    expected_usd: Annotated[float | None, Show("expected", "usd", "USD per pair")]
    saved_usd: Annotated[
        float | None, Show("saved", "usd", "USD per pair", tip="the full policy's USD − this")
    ]


DESIGN_METRICS: tuple[tuple[str, Show], ...] = (
    ("expected_score", Show("Expected score", "score")),
    ("p_neutral", Show("P(neutral)", "pct")),
    ("expected_agreement", Show("Expected agreement", "pct")),
)
"""The designs table's per-design columns `<metric>:<design>`, grouped under the metric."""


class RealisedTableRow(_Keyed):
    """Realised savings: a live run's savings beside the savings replay expects."""

    policy: Annotated[str, Show("Policy")]
    design: Annotated[str, Show("Design")]
    planned_calls: Annotated[int, Show("planned calls", "int")]
    realised_calls: Annotated[int, Show("realised calls", "int")]
    realised_savings: Annotated[float, Show("realised savings", "pct", bar=True)]
    savings: Annotated[float | None, Show("expected savings", "pct", bar=True)]
    gap: Annotated[float | None, Show("realised − expected", "extra")]


_ALPHA = "Krippendorff's alpha (95% CI)"
_FLEISS = "Fleiss' kappa (95% CI)"


class AgreementTableRow(BaseModel):
    """Agreement: a judge config's self-agreement over its calls, per scope."""

    judge: Annotated[str, Show("Judge")]
    config: Annotated[str, Show("Config")]
    pairs: Annotated[int, Show("pairs", "int")]
    alpha_all: Annotated[str, Show("all calls", group=_ALPHA)]
    alpha_within: Annotated[str, Show("within an order", group=_ALPHA)]
    alpha_across: Annotated[str, Show("across orders", group=_ALPHA)]
    fleiss_all: Annotated[str, Show("all calls", group=_FLEISS)]
    fleiss_within: Annotated[str, Show("within an order", group=_FLEISS)]
    fleiss_across: Annotated[str, Show("across orders", group=_FLEISS)]


class JudgeAgreementTableRow(BaseModel):
    """Agreement: two judge configs' decisions on the pairs both judged."""

    first: Annotated[str, Show("Judge · config")]
    second: Annotated[str, Show("against")]
    pairs: Annotated[int, Show("pairs", "int")]
    kappa: Annotated[str, Show("Cohen's kappa (95% CI)")]
    raw: Annotated[str, Show("raw agreement (95% CI)")]


class ConfusionTableRow(BaseModel):
    """Agreement: decisions over all 2K calls against the key, as pair counts."""

    judge: Annotated[str, Show("Judge")]
    config: Annotated[str, Show("Config")]
    key: Annotated[str, Show("key")]
    A: Annotated[int, Show("A", "int", "decision")]
    B: Annotated[int, Show("B", "int", "decision")]
    tie: Annotated[int, Show("tie", "int", "decision", tip="equal A and B votes")]
    none: Annotated[int, Show("none", "int", "decision", tip="no decisive call")]
