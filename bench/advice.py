"""Benchmark: how often certified advice exceeds its budget, and what it saves, against the
point-estimate rule it replaced and an oracle (docs/design.md#certificates).

Usage: .venv/bin/python bench/advice.py [--population N] [--resamples R] [--k K ...]

A population of N simulated pairs (default 2,000) is judged by the six preset configurations
of the simulated judge (strong, left-biased and noisy personas at low and high reasoning)
over the full grid at each K (default 4 and 8); a policy's true change rate and savings are
its means over the whole population. Each configuration also gives, per budget, a knife-edge
subpopulation on which paired_strict's true change is 10% over the budget. For each
population, n in {20, 50, 150, 600} and budget in {1%, 2%}, R resamples (default 400) of n
pairs are advised by the certified advisor with two ranges for its test (`pair`: the largest
change of one pair, the advisor's; `assignment`: the largest change on one reference
assignment, which it used before), by the point-estimate rule and by an oracle that knows the
true change rates. Printed per (K, population, budget, n): the share of advice whose true
change rate exceeds the budget (at most 5% is the certified advisor's promise), that share
among decision-changing advice, how often decision-changing advice is given, mean true
savings, and the certified advisor's savings as a share of the oracle's, before and after.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support import advice_coverage  # noqa: E402

from tasks.replay.certify import assignment_range  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", type=int, default=2000)
    parser.add_argument("--resamples", type=int, default=400)
    parser.add_argument("--k", type=int, nargs="+", default=[4, 8])
    args = parser.parse_args()
    for k in args.k:
        start = time.perf_counter()
        common = dict(
            population=args.population,
            resamples=args.resamples,
            ns=(20, 50, 150, 600),
            budgets=(0.01, 0.02),
            k=k,
            knife=1.1,
        )
        after = advice_coverage(**common)  # type: ignore[arg-type]
        with mock.patch("tasks.replay.advisor.change_range", assignment_range):
            before = advice_coverage(**common)  # type: ignore[arg-type]
        wall = time.perf_counter() - start
        print(
            f"K = {k}: population {args.population} pairs x 6 configs, {args.resamples} "
            f"resamples per (population, n, budget); {wall:.1f} s, "
            f"load {Path('/proc/loadavg').read_text().split()[0]}"
        )
        header = (
            "population", "budget", "n", "over (cert.)", "over|changing (cert.)",
            "changing (cert.) before/after", "over (point)", "savings oracle",
            "savings (cert.) before/after", "kept of oracle before/after",
        )  # fmt: skip
        print(" | ".join(header))
        keys = ["population", "budget", "n"]
        for (population, budget, n), part in after.groupby(keys, sort=False):
            old = before.set_index([*keys, "advisor"]).loc[(population, budget, n)]
            cert = part[part["advisor"] == "certified"].iloc[0]
            point = part[part["advisor"] == "point estimate"].iloc[0]
            oracle = part[part["advisor"] == "oracle"].iloc[0]
            was = old.loc["certified"]
            print(
                f"{population} | {budget:.0%} | {n} | {cert['over']:.1%} | "
                f"{cert['over_when_changing']:.1%} | {was['changing']:.1%} / "
                f"{cert['changing']:.1%} | {point['over']:.1%} | {oracle['savings']:.1%} | "
                f"{was['savings']:.1%} / {cert['savings']:.1%} | "
                f"{was['savings'] / oracle['savings']:.0%} / "
                f"{cert['savings'] / oracle['savings']:.0%}"
            )


if __name__ == "__main__":
    main()
