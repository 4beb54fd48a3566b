"""Run against run: what changed between two runs of a benchmark.

Pairs and judge configs added and removed; calls sent against calls reused; and per judge
config present in both, the reference score's change over the pairs both runs share with a
paired bootstrap interval (the same pairs resampled in both runs), Krippendorff's alpha over
all calls with a paired interval of its change, consistency, the position-bias share (among
order conflicts, how often the left slot won both orders) and the valid share, each before
and after; and the shared pairs whose decision flipped (the
decision of all 2K calls: `tasks.history.view`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from tasks.agreement.stats import rater_agreement
from tasks.agreement.tables import COUNT_COLUMNS, VALUES, alpha_change
from tasks.bootstrap import BOOTSTRAP_RESAMPLES, percentile_interval
from tasks.hashing import digest
from tasks.history.view import CONFIG_KEYS, PAIR_KEYS, RunView, read_run_view
from tasks.workdir import WorkDir

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "ConfigChange",
    "Flip",
    "JudgeAgreement",
    "RunDiff",
    "diff_runs",
    "diff_views",
    "flips_frame",
    "paired_interval",
]

FIGURES = ("consistency", "left_share", "valid_share", "failed_calls")


@dataclass(frozen=True)
class Flip:
    """A shared pair whose reference decision changed for one judge config."""

    judge: str
    config: str
    dataset: str
    pair_id: str
    before: str
    after: str


@dataclass(frozen=True)
class ConfigChange:
    """One judge config present in both runs."""

    judge: str
    config: str
    shared_pairs: int
    score_before: float
    score_after: float
    change_low: float
    change_high: float
    before: dict[str, float]
    after: dict[str, float]
    alpha_before: float = float("nan")
    alpha_after: float = float("nan")
    alpha_change_low: float = float("nan")
    alpha_change_high: float = float("nan")
    """Krippendorff's alpha over all calls of the shared pairs, before and after, and the
    95% paired bootstrap interval of its change (docs/design.md#agreement)."""

    @property
    def score_change(self) -> float:
        return self.score_after - self.score_before


@dataclass(frozen=True)
class JudgeAgreement:
    """A judge config of the earlier run against one of the later run: Cohen's kappa and raw
    agreement of their decisions on the shared pairs, with 95% intervals (an imported
    judgment file is a run like any other)."""

    before: str
    after: str
    pairs: int
    kappa: float
    kappa_low: float
    kappa_high: float
    raw: float
    raw_low: float
    raw_high: float


@dataclass(frozen=True)
class RunDiff:
    """Everything `judgeline diff A B` shows."""

    run_a: str
    run_b: str
    pairs_added: int
    pairs_removed: int
    pairs_shared: int
    configs_added: list[tuple[str, str]]
    configs_removed: list[tuple[str, str]]
    calls_a: dict[str, Any]
    calls_b: dict[str, Any]
    changes: list[ConfigChange] = field(default_factory=list)
    flips: list[Flip] = field(default_factory=list)
    judges: list[JudgeAgreement] = field(default_factory=list)
    """Every judge config of the earlier run against every one of the later run."""
    systems: list[dict[str, Any]] = field(default_factory=list)
    """Per system ranked in both runs' leaderboards: score and rank before and after."""


def paired_interval(
    before: np.ndarray, after: np.ndarray, *, seed_parts: tuple[Any, ...]
) -> tuple[float, float]:
    """95% percentile bootstrap interval of mean(after - before), resampling pairs (the
    same pairs in both runs). Seeded from the data's group key, so it is reproducible. NaN
    when a score is missing (a run not replayed)."""
    delta = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    n = len(delta)
    if n == 0 or np.isnan(delta).any():  # a run without a replay has no scores
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(int(digest("judgeline-diff", *seed_parts)[:16], 16))
    return percentile_interval(delta, rng, BOOTSTRAP_RESAMPLES)


def _configs(view: RunView) -> set[tuple[str, str]]:
    return set(view.figures[CONFIG_KEYS].itertuples(index=False, name=None))


def _figures_of(view: RunView, judge: str, config: str) -> dict[str, float]:
    row = view.figures[(view.figures["judge"] == judge) & (view.figures["config"] == config)]
    return {name: float(row[name].iloc[0]) for name in FIGURES}


def diff_views(a: RunView, b: RunView) -> RunDiff:
    """The diff of two loaded runs (`a` before, `b` after)."""
    keys = [*PAIR_KEYS, "fingerprint"]
    pairs = a.pairs[keys].merge(b.pairs[keys], how="outer", on=keys, indicator=True)
    shared = pairs[pairs["_merge"] == "both"][PAIR_KEYS]
    configs_a, configs_b = _configs(a), _configs(b)
    out = RunDiff(
        run_a=a.record.run_id,
        run_b=b.record.run_id,
        pairs_added=int((pairs["_merge"] == "right_only").sum()),
        pairs_removed=int((pairs["_merge"] == "left_only").sum()),
        pairs_shared=len(shared),
        configs_added=sorted(configs_b - configs_a),
        configs_removed=sorted(configs_a - configs_b),
        calls_a=a.calls,
        calls_b=b.calls,
        judges=_judge_agreement(a, b, shared),
    )
    joined = (
        a.decisions.merge(shared, on=PAIR_KEYS)
        .merge(b.decisions, on=[*CONFIG_KEYS, *PAIR_KEYS], suffixes=("_a", "_b"))
        .sort_values([*CONFIG_KEYS, *PAIR_KEYS], kind="stable")
    )
    for (judge, config), group in joined.groupby(CONFIG_KEYS, sort=True):
        before = group["reference_score_a"].to_numpy(dtype=float)
        after = group["reference_score_b"].to_numpy(dtype=float)
        low, high = paired_interval(before, after, seed_parts=(judge, config, len(group)))
        shape = (len(group), 2, len(VALUES))
        alpha_a, alpha_b, alpha_delta = alpha_change(
            group[[f"{c}_a" for c in COUNT_COLUMNS]].to_numpy(float).reshape(shape),
            group[[f"{c}_b" for c in COUNT_COLUMNS]].to_numpy(float).reshape(shape),
            seed_parts=("judgeline-diff", judge, config, len(group)),
        )
        out.changes.append(
            ConfigChange(
                judge=str(judge),
                config=str(config),
                shared_pairs=len(group),
                score_before=float(before.mean()),
                score_after=float(after.mean()),
                change_low=low,
                change_high=high,
                before=_figures_of(a, str(judge), str(config)),
                after=_figures_of(b, str(judge), str(config)),
                alpha_before=alpha_a,
                alpha_after=alpha_b,
                alpha_change_low=alpha_delta.low,
                alpha_change_high=alpha_delta.high,
            )
        )
        flipped = group[group["decision_a"] != group["decision_b"]]
        out.flips.extend(
            Flip(str(judge), str(config), str(d), str(p), str(x), str(y))
            for d, p, x, y in zip(
                flipped["dataset"],
                flipped["pair_id"],
                flipped["decision_a"],
                flipped["decision_b"],
                strict=True,
            )
        )
    return out


def _judge_agreement(a: RunView, b: RunView, shared: pd.DataFrame) -> list[JudgeAgreement]:
    """Every config of `a` against every config of `b`, on the shared pairs both judged."""
    code = {"A": 0, "B": 1, "N": 2}
    out = []
    sides = [
        {
            key: group.set_index(PAIR_KEYS)["decision"].map(code)
            for key, group in view.decisions.merge(shared, on=PAIR_KEYS).groupby(CONFIG_KEYS)
        }
        for view in (a, b)
    ]
    for (ja, ca), first in sorted(sides[0].items()):
        for (jb, cb), second in sorted(sides[1].items()):
            both = first.index.intersection(second.index).sort_values()
            kappa, raw = rater_agreement(
                first.loc[both].to_numpy(),
                second.loc[both].to_numpy(),
                3,
                seed_parts=(ja, ca, jb, cb),
            )
            out.append(
                JudgeAgreement(
                    f"{ja} · {ca}",
                    f"{jb} · {cb}",
                    len(both),
                    kappa.value,
                    kappa.low,
                    kappa.high,
                    raw.value,
                    raw.low,
                    raw.high,
                )  # fmt: skip
            )
    return out


def diff_runs(work: WorkDir, run_a: str, run_b: str) -> RunDiff:
    """`judgeline diff A B`: what changed from run `run_a` to run `run_b`."""
    from tasks.leaderboard.history import system_changes

    result = diff_views(read_run_view(work, run_a), read_run_view(work, run_b))
    return replace(result, systems=system_changes(work, run_a, run_b))


def flips_frame(diff: RunDiff) -> pd.DataFrame:
    """The flipped pairs as a table (for the report and `--json`)."""
    return pd.DataFrame([f.__dict__ for f in diff.flips])
