"""Agreement: how far a judge agrees with itself across seeds and orders, with other judges
and with the key (docs/design.md#agreement).

`stats` computes Krippendorff's alpha, Fleiss' kappa and Cohen's kappa from per-pair
features with bootstrap intervals over pairs; `tables` builds a run's tables from its
outcomes.
"""
