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

from tasks.agreement.stats import decision_agreement
from tasks.agreement.tables import COUNT_COLUMNS, VALUES, alpha_change
from tasks.bootstrap import BOOTSTRAP_RESAMPLES, percentile_interval
from tasks.hashing import digest
from tasks.history.view import CONFIG_KEYS, PAIR_KEYS, RunView, read_run_view
from tasks.store.workdir import WorkDir

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


def _pair_keys(frame: pd.DataFrame, *more: str) -> list[tuple[Any, ...]]:
    """Each row's (dataset, pair_id, *more)."""
    return list(zip(*(frame[k].tolist() for k in (*PAIR_KEYS, *more)), strict=True))


def _judged(view: RunView, place: dict[tuple[Any, ...], int]) -> dict[Any, np.ndarray]:
    """Per judge config of the view that judged a shared pair (in sorted order): its
    decision's row for each shared pair (by `place`, the pair's sorted order), -1 where the
    config did not judge that pair."""
    decisions = view.decisions
    places = np.array([place.get(k, -1) for k in _pair_keys(decisions)], dtype=np.int64)
    found = cast(dict[Any, np.ndarray], decisions.groupby(CONFIG_KEYS).indices)
    out = {}
    for key in sorted(found):
        rows = found[key][places[found[key]] >= 0]
        if len(rows):
            out[key] = np.full(len(place), -1, dtype=np.int64)
            out[key][places[rows]] = rows
    return out


def diff_views(a: RunView, b: RunView) -> RunDiff:
    """The diff of two loaded runs (`a` before, `b` after)."""
    # A pair is the same pair in both runs when its dataset, id and fingerprint are.
    pairs_a, pairs_b = (set(_pair_keys(view.pairs, "fingerprint")) for view in (a, b))
    shared = sorted(key[:2] for key in pairs_a & pairs_b)
    place = {key: i for i, key in enumerate(shared)}
    judged_a, judged_b = _judged(a, place), _judged(b, place)
    configs_a, configs_b = _configs(a), _configs(b)
    out = RunDiff(
        run_a=a.record.run_id,
        run_b=b.record.run_id,
        pairs_added=len(pairs_b - pairs_a),
        pairs_removed=len(pairs_a - pairs_b),
        pairs_shared=len(shared),
        configs_added=sorted(configs_b - configs_a),
        configs_removed=sorted(configs_a - configs_b),
        calls_a=a.calls,
        calls_b=b.calls,
        judges=_judge_agreement(_codes(a, judged_a), _codes(b, judged_b)),
    )
    # Each run's values by decision row. The counts keep the column-major layout of a frame's
    # values (`np.asfortranarray` below), which the order of alpha's sums follows.
    scores = [v.decisions["reference_score"].to_numpy(dtype=float) for v in (a, b)]
    counts = [v.decisions[COUNT_COLUMNS].to_numpy(float) for v in (a, b)]
    decided = [v.decisions["decision"].to_numpy() for v in (a, b)]
    figures_a, figures_b = _figures_by_config(a), _figures_by_config(b)
    for judge, config in sorted(judged_a.keys() & judged_b.keys()):
        at_a, at_b = judged_a[(judge, config)], judged_b[(judge, config)]
        both = np.flatnonzero((at_a >= 0) & (at_b >= 0))  # in the shared pairs' sorted order
        if not len(both):
            continue
        rows_a, rows_b = at_a[both], at_b[both]
        before, after = scores[0][rows_a], scores[1][rows_b]
        low, high = paired_interval(before, after, seed_parts=(judge, config, len(both)))
        shape = (len(both), 2, len(VALUES))
        alpha_a, alpha_b, alpha_delta = alpha_change(
            np.asfortranarray(counts[0][rows_a]).reshape(shape),
            np.asfortranarray(counts[1][rows_b]).reshape(shape),
            seed_parts=("judgeline-diff", judge, config, len(both)),
        )
        name = (str(judge), str(config))
        out.changes.append(
            ConfigChange(
                judge=name[0],
                config=name[1],
                shared_pairs=len(both),
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
        flipped = decided[0][rows_a] != decided[1][rows_b]
        out.flips.extend(
            Flip(*name, str(shared[i][0]), str(shared[i][1]), str(x), str(y))
            for i, x, y in zip(
                both[flipped], decided[0][rows_a[flipped]], decided[1][rows_b[flipped]], strict=True
            )
        )
    return out


_CODE = {"A": 0, "B": 1, "N": 2}


def _codes(view: RunView, judged: dict[Any, np.ndarray]) -> dict[Any, np.ndarray]:
    """Per judge config of `judged` (`_judged`): its decision code (_CODE) of every shared
    pair, -1 where it did not judge the pair."""
    codes = view.decisions["decision"].map(_CODE).to_numpy()
    return {key: np.where(rows >= 0, codes[rows], -1) for key, rows in judged.items()}


def _judge_agreement(a: dict[Any, np.ndarray], b: dict[Any, np.ndarray]) -> list[JudgeAgreement]:
    """Every config of the earlier run against every config of the later run (`_codes`), on
    the shared pairs both judged, in the pairs' sorted order."""
    out = []
    for (ja, ca), first in a.items():
        for (jb, cb), second in b.items():
            pairs, kappa, raw = decision_agreement(first, second, seed_parts=(ja, ca, jb, cb))
            out.append(
                JudgeAgreement(
                    f"{ja} · {ca}",
                    f"{jb} · {cb}",
                    pairs,
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
