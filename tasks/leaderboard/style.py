"""Style covariates of a pair, as Arena-Hard-Auto defines them, and whether they can be told
apart from the systems (docs/design.md#leaderboards).

Counts per answer: words (whitespace-separated, not a tokenizer's tokens), markdown headers,
list items and bold spans (Arena-Hard-Auto's patterns). For identity A's answer `a` and B's
`b`, the covariates are

- `v2` (Arena-Hard-Auto v2, `show_result.py`): `length` = (a - b) / (a + b) of the words;
  `header_density`, `list_density`, `bold_density` = (d_a - d_b) / (d_a + d_b + 1) with
  d = count / (words + 1);
- `v0.1` (Arena-Hard-Auto v0.1, `construct_style_matrices`): `length`, `headers`, `lists`,
  `bold` = (a - b) / (a + b + 1) of the raw counts.

Each is divided by its root mean square over the pairs, not centred: a covariate of 0 is
still a pair of equal style, where the controlled scores are read. One that is 0 on every
pair is left out.
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "COLLINEAR_R2", "STYLE_SETS", "StyleSet", "collinear", "scaled", "style_counts",
    "style_covariates",
]  # fmt: skip

StyleSet = Literal["v2", "v0.1"]
STYLE_SETS: dict[str, tuple[str, ...]] = {
    "v2": ("length", "header_density", "list_density", "bold_density"),
    "v0.1": ("length", "headers", "lists", "bold"),
}
DEFINITIONS: dict[str, str] = {
    "v2": "length (a-b)/(a+b) of words; markdown densities d = count/(words+1), "
    "(d_a-d_b)/(d_a+d_b+1)",
    "v0.1": "(a-b)/(a+b+1) of words, headers, list items, bold spans",
}
COLLINEAR_R2 = 0.9
"""A covariate whose share explained by the system columns and the other covariates (R^2
of a least-squares fit, weighted by games) is at least this (a variance inflation factor of
10) cannot be told apart from them."""
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+\.)\s", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")
Floats = NDArray[np.float64]


def style_counts(text: str) -> tuple[int, int, int, int]:
    """(words, markdown headers, list items, bold spans) of one answer."""
    return (
        len(text.split()),
        len(_HEADER.findall(text)),
        len(_LIST.findall(text)),
        len(_BOLD.findall(text)),
    )


def _ratio(a: Floats, b: Floats, plus: float) -> Floats:
    total = a + b + plus
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, (a - b) / np.where(total > 0, total, 1.0), 0.0)


def scaled(raw: Floats, names: tuple[str, ...]) -> tuple[Floats, list[str]]:
    """The columns of `raw` divided by their root mean square; all-zero ones left out."""
    rms = np.sqrt(np.mean(raw**2, axis=0)) if len(raw) else np.zeros(raw.shape[1])
    kept = rms > 1e-12
    return raw[:, kept] / rms[kept], [n for n, keep in zip(names, kept, strict=True) if keep]


def style_covariates(
    answers_a: list[str], answers_b: list[str], kind: StyleSet = "v2"
) -> tuple[Floats, list[str]]:
    """The scaled covariates of each pair (pairs x kept features) and their names."""
    a = np.array([style_counts(t) for t in answers_a], dtype=float).reshape(-1, 4)
    b = np.array([style_counts(t) for t in answers_b], dtype=float).reshape(-1, 4)
    if kind == "v0.1":
        raw = _ratio(a, b, 1.0)
    else:
        density_a, density_b = a[:, 1:] / (a[:, :1] + 1), b[:, 1:] / (b[:, :1] + 1)
        raw = np.hstack([_ratio(a[:, :1], b[:, :1], 0.0), _ratio(density_a, density_b, 1.0)])
    return scaled(raw, STYLE_SETS[kind])


def collinear(x: Floats, covariates: Floats, weight: Floats) -> tuple[Floats, Floats]:
    """Per covariate, the share (R^2, uncentred, weighted by `weight` per row) explained by
    the system columns `x` alone and by them with the other covariates."""
    k = covariates.shape[1]
    alone, together = np.zeros(k), np.zeros(k)
    root = np.sqrt(np.asarray(weight, dtype=float))[:, None]
    systems = np.asarray(x, dtype=float) * root
    for j in range(k):
        target = covariates[:, j] * root[:, 0]
        total = float(target @ target)
        if total <= 0:
            continue
        others = np.hstack([systems, np.delete(covariates, j, axis=1) * root])
        for slot, design in ((alone, systems), (together, others)):
            coef, *_ = np.linalg.lstsq(design, target, rcond=None)
            residual = target - design @ coef
            slot[j] = 1.0 - float(residual @ residual) / total
    return alone, together
