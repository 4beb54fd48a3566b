"""Style covariates of a pair (Arena-Hard-Auto v2's style control): answer length and
markdown headers, list items and bold spans, as normalised differences.

For each feature, a pair's covariate is `(a - b) / (a + b)` (0 when both are 0) of its
identity A and B answers, then standardised over the pairs (mean 0, standard deviation 1;
a feature constant over the pairs is left out). Length is counted in whitespace-separated
words, not in a tokenizer's tokens.
"""

from __future__ import annotations

import re

import numpy as np
from numpy.typing import NDArray

__all__ = ["STYLE_FEATURES", "style_counts", "style_covariates"]

STYLE_FEATURES = ("length", "headers", "lists", "bold")
_HEADER = re.compile(r"^#{1,6}\s", re.MULTILINE)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+\.)\s", re.MULTILINE)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")


def style_counts(text: str) -> tuple[int, int, int, int]:
    """(words, markdown headers, list items, bold spans) of one answer."""
    return (
        len(text.split()),
        len(_HEADER.findall(text)),
        len(_LIST.findall(text)),
        len(_BOLD.findall(text)),
    )


def style_covariates(
    answers_a: list[str], answers_b: list[str]
) -> tuple[NDArray[np.float64], list[str]]:
    """The standardised covariates of each pair (pairs x kept features) and their names."""
    a = np.array([style_counts(t) for t in answers_a], dtype=float).reshape(-1, 4)
    b = np.array([style_counts(t) for t in answers_b], dtype=float).reshape(-1, 4)
    total = a + b
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.where(total > 0, (a - b) / np.where(total > 0, total, 1.0), 0.0)
    spread = diff.std(axis=0)
    kept = spread > 1e-12
    standard = (diff[:, kept] - diff[:, kept].mean(axis=0)) / spread[kept]
    return standard, [name for name, keep in zip(STYLE_FEATURES, kept, strict=True) if keep]
