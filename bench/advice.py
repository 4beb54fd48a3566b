"""Benchmark: how often certified advice exceeds its budget, and what it saves, against the
point-estimate rule it replaced (docs/design.md#certificates).

Usage: .venv/bin/python bench/advice.py [--population N] [--resamples R] [--k K]

A population of N simulated pairs (default 2,000) is judged by the six preset configurations
of the simulated judge (strong, left-biased and noisy personas at low and high reasoning)
over the full grid at K = 4; a policy's true change rate and savings are its means over the
whole population. For each configuration, n in {20, 50, 150, 600} and budget in {1%, 2%},
R resamples (default 400) of n pairs are advised by both rules. Printed per (budget, n):
the share of advice whose true change rate exceeds the budget (at most 5% is the certified
advisor's promise), that share among decision-changing advice, how often decision-changing
advice is given, and the mean true savings of the advice, with the certified advisor's
savings as a share of the point-estimate rule's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support import advice_coverage  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", type=int, default=2000)
    parser.add_argument("--resamples", type=int, default=400)
    parser.add_argument("--k", type=int, default=4)
    args = parser.parse_args()
    start = time.perf_counter()
    study = advice_coverage(
        population=args.population,
        resamples=args.resamples,
        ns=(20, 50, 150, 600),
        budgets=(0.01, 0.02),
        k=args.k,
    )
    wall = time.perf_counter() - start
    print(
        f"population {args.population} pairs x 6 configs, K = {args.k}, "
        f"{args.resamples} resamples per (config, n, budget); {wall:.1f} s, "
        f"load {Path('/proc/loadavg').read_text().split()[0]}"
    )
    header = (
        "budget", "n", "over (cert.)", "over|changing (cert.)", "changing (cert.)",
        "over (point)", "over|changing (point)", "changing (point)",
        "savings (cert.)", "savings (point)", "kept",
    )  # fmt: skip
    print(" | ".join(header))
    for (budget, n), part in study.groupby(["budget", "n"]):
        cert = part[part["advisor"] == "certified"].iloc[0]
        point = part[part["advisor"] == "point estimate"].iloc[0]
        print(
            f"{budget:.0%} | {n} | {cert['over']:.1%} | {cert['over_when_changing']:.1%} | "
            f"{cert['changing']:.1%} | {point['over']:.1%} | {point['over_when_changing']:.1%} | "
            f"{point['changing']:.1%} | {cert['savings']:.1%} | {point['savings']:.1%} | "
            f"{cert['savings'] / point['savings']:.0%}"
        )


if __name__ == "__main__":
    main()
