"""The cost to match a policy: least expected cost of a nonadaptive mixture reaching its agreement.

A mixture randomises over components (cost, agreement), so its (expected cost, agreement)
points fill the convex hull of the components; the best agreement at a given cost is the
upper concave envelope, and the cheapest mixture reaching a target sits where that envelope
first crosses it (docs/design.md#cost-to-match).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

TOLERANCE = 1e-12
"""Agreements are float sums; a component within this of the target counts as reaching it."""


def _turn(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def upper_envelope(
    costs: Sequence[float], agreements: Sequence[float]
) -> list[tuple[float, float]]:
    """Vertices (cost, agreement) of the upper concave envelope, by increasing cost."""
    best: dict[float, float] = {}
    for cost, agreement in zip(costs, agreements, strict=True):
        if math.isnan(agreement):
            continue
        best[cost] = max(agreement, best.get(cost, -math.inf))
    hull: list[tuple[float, float]] = []
    for point in sorted(best.items()):
        # Drop a middle vertex that lies on or below the chord: it is not on the envelope.
        while len(hull) >= 2 and _turn(hull[-2], hull[-1], point) >= 0:
            hull.pop()
        hull.append(point)
    return hull


def cost_to_match(costs: Sequence[float], agreements: Sequence[float], target: float) -> float:
    """Least expected cost of a mixture of components whose agreement is at least `target`.

    NaN if no mixture reaches it (the components' best agreement is below the target).
    """
    hull = upper_envelope(costs, agreements)
    if not hull:
        return math.nan
    if hull[0][1] >= target - TOLERANCE:
        return hull[0][0]
    for (c0, g0), (c1, g1) in zip(hull, hull[1:], strict=False):
        if g1 >= target - TOLERANCE:
            if g1 <= target:
                return c1
            return c0 + (target - g0) * (c1 - c0) / (g1 - g0)
    return math.nan
