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
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "COLLINEAR_R2", "STYLE_SETS", "AnswerStats", "StyleSet", "collinear", "scaled", "style_counts",
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


@dataclass(frozen=True)
class AnswerStats:
    """Per pair, each identity's answer counted once: `style_counts` (pairs x 4) and its
    length in characters."""

    counts_a: Floats
    counts_b: Floats
    chars_a: Floats
    chars_b: Floats

    @classmethod
    def of(cls, answers: tuple[list[str], list[str]]) -> AnswerStats:
        a, b = answers
        return cls(_counts(a), _counts(b), np.array([len(t) for t in a], dtype=float),
                   np.array([len(t) for t in b], dtype=float))  # fmt: skip


def _counts(texts: list[str]) -> Floats:
    return np.array([style_counts(t) for t in texts], dtype=float).reshape(-1, 4)


def style_covariates(
    answers_a: list[str] | Floats, answers_b: list[str] | Floats, kind: StyleSet = "v2"
) -> tuple[Floats, list[str]]:
    """The scaled covariates of each pair (pairs x kept features) and their names, from the
    answers or their `style_counts`."""
    a = answers_a if isinstance(answers_a, np.ndarray) else _counts(answers_a)
    b = answers_b if isinstance(answers_b, np.ndarray) else _counts(answers_b)
    if kind == "v0.1":
        raw = _ratio(a, b, 1.0)
    else:
        density_a, density_b = a[:, 1:] / (a[:, :1] + 1), b[:, 1:] / (b[:, :1] + 1)
        raw = np.hstack([_ratio(a[:, :1], b[:, :1], 0.0), _ratio(density_a, density_b, 1.0)])
    return scaled(raw, STYLE_SETS[kind])


def collinear(x: Any, covariates: Floats, weight: Floats) -> tuple[Floats, Floats]:
    """Per covariate, the share (R^2, uncentred, weighted by `weight` per row) explained by
    the system columns `x` alone and by them with the other covariates (least squares from
    the weighted Gram matrix)."""
    from scipy import sparse

    design = sparse.hstack([sparse.csr_matrix(x), sparse.csr_matrix(covariates)]).tocsr()
    gram = np.asarray((design.T @ sparse.diags(np.asarray(weight, float)) @ design).todense())
    p, k = design.shape[1] - covariates.shape[1], covariates.shape[1]
    alone, together = np.zeros(k), np.zeros(k)
    for j in range(k):
        target = p + j
        total = gram[target, target]
        if total <= 0:
            continue
        for slot, columns in (
            (alone, np.arange(p)),
            (together, np.delete(np.arange(p + k), target)),
        ):
            block = gram[np.ix_(columns, columns)]
            cross = gram[columns, target]
            coef = np.linalg.lstsq(block, cross, rcond=None)[0]
            slot[j] = min(1.0, max(0.0, float(cross @ coef) / total))
    return alone, together
