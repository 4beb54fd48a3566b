"""Coverage of the agreement intervals over simulated judges of known agreement.

Each simulated judge is a population of pair types (a lean towards A, drawn per type) judged
with its own position bias, tie, abstention and missing rates at K = 2 or 4. Its true alpha
and kappa are the statistics of the population's expected per-pair features, computed exactly
by enumerating every count of every order's calls (the statistics are smooth functions of
those expectations, so they are what the sample statistics converge to). A run is n pairs
drawn from it; the 95% interval covers when the true value is inside it.

`python tests/agreement/test_agreement_coverage.py` prints the table.
"""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest

from tasks.agreement.stats import (
    Estimate,
    alpha_from_sums,
    cohen_features,
    cohen_from_sums,
    fleiss_from_sums,
    rater_agreement,
    raw_from_sums,
)
from tasks.agreement.tables import scope_estimates, scope_features

JUDGES = 250
SIZES = (30, 100, 300)
RESAMPLES = 1000
TYPES = 5
POPULATION = 1e12
"""Pairs the expected features are scaled to: alpha's (N - 1) / N factor is 1 in the limit."""
STATISTICS = {"alpha": alpha_from_sums, "fleiss": fleiss_from_sums}
short = {"alpha": "alpha", "fleiss_kappa": "fleiss"}


def compositions(k: int) -> np.ndarray:
    """Every count of A, B, T, X and missing calls among k calls (rows of 5)."""
    return np.array([c for c in product(range(k + 1), repeat=5) if sum(c) == k])


def multinomial_probs(comps: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """P(each composition) for each row of category probabilities (types x compositions)."""
    k = comps[0].sum()
    log_coef = np.log(math.factorial(k)) - np.log(
        [math.prod(math.factorial(int(x)) for x in c) for c in comps]
    )
    with np.errstate(divide="ignore"):
        logs = comps @ np.log(probs).T
    return np.exp(log_coef[None, :] + np.nan_to_num(logs.T, neginf=-np.inf))


class Population:
    """One simulated judge (two, for Cohen's kappa: a second judge of the same pairs)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.k = int(rng.choice([2, 4]))
        self.comps = compositions(self.k)
        self.weights = rng.dirichlet(np.ones(TYPES))
        lean = rng.beta(0.5, 0.5, TYPES)
        self.laws = [self._judge(rng, lean) for _ in range(2)]

    def _judge(self, rng: np.random.Generator, lean: np.ndarray) -> np.ndarray:
        """Per order, per type: P(each composition of that order's K calls)."""
        bias = rng.uniform(0, 0.3)
        tie, abstain, missing = rng.uniform(0, 0.2), rng.uniform(0, 0.05), rng.uniform(0, 0.2)
        decisive = 1 - tie - abstain - missing
        laws = []
        for shift in (bias, -bias):
            a = np.clip(lean + shift, 0.01, 0.99)
            probs = np.column_stack(
                [
                    decisive * a,
                    decisive * (1 - a),
                    *[np.full(TYPES, x) for x in (tie, abstain, missing)],
                ]
            )
            laws.append(multinomial_probs(self.comps, probs))
        return np.stack(laws)  # (orders, types, compositions)

    def _counts(self, ab: np.ndarray, ba: np.ndarray) -> np.ndarray:
        return np.stack([self.comps[ab][:, :4], self.comps[ba][:, :4]], axis=1).astype(float)

    def truth(self) -> dict[str, float]:
        """Every statistic of the population: of its expected per-pair features."""
        c = len(self.comps)
        ab, ba = np.repeat(np.arange(c), c), np.tile(np.arange(c), c)
        scopes = scope_features(self._counts(ab, ba))
        law = self.laws[0]
        joint = (self.weights[:, None] * law[0][:, ab] * law[1][:, ba]).sum(axis=0)
        out = {
            f"{name} {scope}": float(statistic(POPULATION * (joint @ features)))
            for scope, features in scopes.items()
            for name, statistic in STATISTICS.items()
        }
        decided = [self._decision_law(law) for law in self.laws]  # (types, 3) each
        agree = (self.weights * (decided[0] * decided[1]).sum(axis=1)).sum()
        sums = np.concatenate([[agree], self.weights @ decided[0], self.weights @ decided[1]])
        out["cohen"] = float(cohen_from_sums(sums))
        out["raw"] = float(raw_from_sums(sums))
        return out

    def _decision_law(self, law: np.ndarray) -> np.ndarray:
        """P(decision A, B, N over both orders' calls) per type."""
        votes = self.comps[:, 0] - self.comps[:, 1]
        margin = votes[:, None] + votes[None, :]  # (ab, ba)
        joint = law[0][:, :, None] * law[1][:, None, :]  # (types, ab, ba)
        return np.stack(
            [
                joint[:, margin > 0].sum(1),
                joint[:, margin < 0].sum(1),
                joint[:, margin == 0].sum(1),
            ],
            axis=1,
        )

    @staticmethod
    def rater_estimates(features: np.ndarray, seed: tuple[int, int]) -> tuple[Estimate, Estimate]:
        """Kappa and raw agreement of the two judges from their `cohen_features`."""
        first = features[:, 1:4].argmax(axis=1)
        second = features[:, 4:7].argmax(axis=1)
        return rater_agreement(first, second, 3, seed_parts=seed)

    def sample(self, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        """The per-pair features of n pairs drawn from the population."""
        types = rng.choice(TYPES, size=n, p=self.weights)
        decisions = []
        scopes: dict[str, np.ndarray] = {}
        for j, law in enumerate(self.laws):
            ab, ba = (
                (law[o][types].cumsum(axis=1) < rng.uniform(size=(n, 1))).sum(axis=1)
                for o in range(2)
            )
            ab, ba = np.minimum(ab, len(self.comps) - 1), np.minimum(ba, len(self.comps) - 1)
            counts = self._counts(ab, ba)
            if j == 0:
                scopes = scope_features(counts)
            margin = counts[:, :, 0].sum(1) - counts[:, :, 1].sum(1)
            decisions.append(np.select([margin > 0, margin < 0], [0, 1], 2))
        return scopes | {"cohen": cohen_features(decisions[0], decisions[1], 3)}


def coverage(judges: int = JUDGES, sizes: tuple[int, ...] = SIZES) -> dict[int, dict[str, float]]:
    """Per run size, per statistic: the share of simulated judges whose interval covers."""
    rng = np.random.default_rng(20261202)
    populations = [Population(rng) for _ in range(judges)]
    truths = [p.truth() for p in populations]
    table: dict[int, dict[str, float]] = {}
    for n in sizes:
        hits: dict[str, list[bool]] = {}
        for i, (population, truth) in enumerate(zip(populations, truths, strict=True)):
            features = population.sample(rng, n)
            kappa, raw = population.rater_estimates(features["cohen"], (i, n))
            found = {"cohen": kappa, "raw": raw}
            scopes = {scope: features[scope] for scope in ("all", "within", "across")}
            own = scope_estimates(scopes, seed_parts=(i, n), resamples=RESAMPLES)
            found |= {f"{short[name]} {scope}": est for (name, scope), est in own.items()}
            for name, true in truth.items():
                est = found[name]
                if not np.isfinite(est.value):
                    continue  # undefined on the run (one category only): no interval to cover
                hits.setdefault(name, []).append(bool(est.low <= true <= est.high))
        table[n] = {name: float(np.mean(h)) for name, h in hits.items()}
    return table


@pytest.mark.slow
def test_interval_coverage_over_simulated_judges() -> None:
    table = coverage()
    for n, row in table.items():
        for name, share in row.items():
            assert share >= 0.92, f"{name} at n = {n}: {share:.1%} of 95% intervals cover"


if __name__ == "__main__":
    result = coverage()
    names = list(result[SIZES[0]])
    print("n    " + " ".join(f"{name:>16}" for name in names))
    for n, row in result.items():
        print(f"{n:<4} " + " ".join(f"{row[name]:>16.1%}" for name in names))
