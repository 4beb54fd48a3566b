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
from typing import Any, cast

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


def _figures_by_config(view: RunView) -> dict[tuple[str, str], dict[str, float]]:
    """Per judge config of the view (as text): its FIGURES."""
    return {
        (str(r["judge"]), str(r["config"])): {name: float(r[name]) for name in FIGURES}
        for r in view.figures[[*CONFIG_KEYS, *FIGURES]].to_dict("records")
    }


def _groups(frame: pd.DataFrame) -> list[tuple[tuple[Any, ...], np.ndarray]]:
    """The rows of each judge config of `frame` (positions, in the frame's order), the
    configs in sorted order."""
    found = cast(dict[tuple[Any, ...], np.ndarray], frame.groupby(CONFIG_KEYS).indices)
    return [(key, found[key]) for key in sorted(found)]


def diff_views(a: RunView, b: RunView) -> RunDiff:
    """The diff of two loaded runs (`a` before, `b` after)."""
    keys = [*PAIR_KEYS, "fingerprint"]
    pairs = a.pairs[keys].merge(b.pairs[keys], how="outer", on=keys, indicator=True)
    shared = pairs[pairs["_merge"] == "both"][PAIR_KEYS].sort_values(PAIR_KEYS)
    # Each shared pair's place in sorted order: where the judge agreement reads it.
    shared = shared.assign(place=np.arange(len(shared)))
    sides = [view.decisions.merge(shared, on=PAIR_KEYS) for view in (a, b)]
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
        judges=_judge_agreement(sides[0], sides[1], len(shared)),
    )
    joined = (
        sides[0]
        .merge(sides[1].drop(columns="place"), on=[*CONFIG_KEYS, *PAIR_KEYS], suffixes=("_a", "_b"))
        .sort_values([*CONFIG_KEYS, *PAIR_KEYS], kind="stable")
    )
    scores = {side: joined[f"reference_score_{side}"].to_numpy(dtype=float) for side in "ab"}
    counts = {side: joined[[f"{c}_{side}" for c in COUNT_COLUMNS]].to_numpy(float) for side in "ab"}
    decided = {side: joined[f"decision_{side}"].to_numpy() for side in "ab"}
    datasets, pair_ids = joined["dataset"].to_numpy(), joined["pair_id"].to_numpy()
    figures_a, figures_b = _figures_by_config(a), _figures_by_config(b)
    for (judge, config), found in _groups(joined):
        # Sorted by config, a config's rows are consecutive: a slice keeps the frame values'
        # column-major layout, which the order of alpha's sums follows.
        rows = slice(found[0], found[-1] + 1)
        size = len(found)
        before, after = scores["a"][rows], scores["b"][rows]
        low, high = paired_interval(before, after, seed_parts=(judge, config, size))
        shape = (size, 2, len(VALUES))
        alpha_a, alpha_b, alpha_delta = alpha_change(
            counts["a"][rows].reshape(shape),
            counts["b"][rows].reshape(shape),
            seed_parts=("judgeline-diff", judge, config, size),
        )
        name = (str(judge), str(config))
        out.changes.append(
            ConfigChange(
                judge=name[0],
                config=name[1],
                shared_pairs=size,
                score_before=float(before.mean()),
                score_after=float(after.mean()),
                change_low=low,
                change_high=high,
                before=figures_a[name],
                after=figures_b[name],
                alpha_before=alpha_a,
                alpha_after=alpha_b,
                alpha_change_low=alpha_delta.low,
                alpha_change_high=alpha_delta.high,
            )
        )
        flipped = found[decided["a"][rows] != decided["b"][rows]]
        out.flips.extend(
            Flip(name[0], name[1], str(d), str(p), str(x), str(y))
            for d, p, x, y in zip(
                datasets[flipped],
                pair_ids[flipped],
                decided["a"][flipped],
                decided["b"][flipped],
                strict=True,
            )
        )
    return out


_CODE = {"A": 0, "B": 1, "N": 2}


def _codes(side: pd.DataFrame, shared: int) -> dict[tuple[Any, ...], np.ndarray]:
    """Per judge config of `side` (decisions of the shared pairs, with each pair's `place`):
    its decision code (_CODE) of every shared pair, -1 where it did not judge the pair."""
    codes = side["decision"].map(_CODE).to_numpy()
    places = side["place"].to_numpy()
    out = {}
    for key, rows in _groups(side):
        mine = np.full(shared, -1, dtype=np.int64)
        mine[places[rows]] = codes[rows]
        out[key] = mine
    return out


def _judge_agreement(a: pd.DataFrame, b: pd.DataFrame, shared: int) -> list[JudgeAgreement]:
    """Every config of `a` against every config of `b` (their decisions of the shared pairs),
    on the shared pairs both judged, in the pairs' sorted order."""
    out = []
    later = _codes(b, shared)
    for (ja, ca), first in _codes(a, shared).items():
        for (jb, cb), second in later.items():
            both = (first >= 0) & (second >= 0)
            kappa, raw = rater_agreement(first[both], second[both], 3, seed_parts=(ja, ca, jb, cb))
            out.append(
                JudgeAgreement(
                    f"{ja} · {ca}",
                    f"{jb} · {cb}",
                    int(both.sum()),
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
