"""The length-controlled win rate against the baseline (docs/design.md#leaderboards).

After AlpacaEval 2's GLM (`alpaca_eval/metrics/glm_winrate.py`), per judge config and rule,
over the games of each system with the baseline: the log-odds that system i beats the
baseline on question q is

    theta_i + delta_q + sum_k beta_k f_k(len_i, len_baseline)

and the length-controlled win rate of i is the model's chance of beating the baseline with
the length terms at 0 (answers of equal length), averaged over i's games:
100 x mean sigmoid(theta_i + delta_q). Lengths are characters, as AlpacaEval counts them.
The length terms are AlpacaEval's tanh(delta_len / sd(delta_len)) and tanh(c log(len_i /
len_baseline)) for c = 1/2, 1, 2 (each 0 at equal length), each scaled to root mean square
1. Unlike AlpacaEval, whose GLM is fitted per model (its own length coefficient and
normalisation), `beta` and the normalisation are shared by the config's systems: the
length bias is the judge's, so every system's games inform it, and the extra shapes let
it follow a judge whose preference grows with the ratio of the lengths as well as with
their difference. `delta_q`, a per-question term (AlpacaEval's instruction difficulty,
here learned from the config's own systems), carries a ridge (bt.QUESTION_RIDGE), as does
`beta`; `theta` is maximum likelihood, so with no length effect the rate is the plain win
rate. A system that won (lost) no game against the baseline has no finite rate; its rate is
a bound (`intervals.no_win_bound`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from tasks.leaderboard.bootstrap import fit_bootstrap
from tasks.leaderboard.bt import fit
from tasks.leaderboard.intervals import interval
from tasks.leaderboard.style import COLLINEAR_R2, collinear, scaled

__all__ = ["LENGTH_TERMS", "LengthControl", "length_basis", "length_controlled"]

Floats = NDArray[np.float64]
LENGTH_TERMS = ("tanh_length_difference", "tanh_half_log_ratio", "tanh_log_ratio",
                "tanh_twice_log_ratio")  # fmt: skip


@dataclass(frozen=True)
class LengthControl:
    """Per system (index into the battles' systems): the rate, its replicates' interval, and
    the fit's length coefficients and whether the length term is told apart from the
    systems (`identified`: the share of the fitted length term the systems explain, R^2,
    below style.COLLINEAR_R2)."""

    rate: Floats
    lower: Floats
    upper: Floats
    coefficients: dict[str, float] = field(default_factory=dict)
    r2_systems: float = 0.0
    identified: bool = True
    sd_length_difference: float = 0.0


def length_basis(own: Floats, other: Floats) -> tuple[Floats, list[str], float]:
    """The length terms of rows whose system answered `own` characters and the baseline
    `other`, scaled (style.scaled), their names, and sd(delta_len) in characters."""
    delta = own - other
    sd = float(delta.std()) if len(delta) else 0.0
    ratio = np.log((own + 1.0) / (other + 1.0))
    raw = np.stack(
        [np.tanh(delta / sd) if sd > 0 else np.zeros_like(delta),
         np.tanh(0.5 * ratio), np.tanh(ratio), np.tanh(2.0 * ratio)],
        axis=1,
    )  # fmt: skip
    terms, names = scaled(raw, LENGTH_TERMS)
    return terms, names, sd


def _rates(
    theta: Floats, delta: Floats, system: NDArray[np.int64], question: NDArray[np.int64],
    weight: Floats, size: int, dtype: type = np.float64,
) -> Floats:  # fmt: skip
    """Per replicate (rows of `theta`, `delta`, `weight`) and system: 100 x the weighted
    mean over its rows of sigmoid(theta_system + delta_question); NaN without a game.
    Replicates may use single precision (`dtype`): they only place an interval."""
    from scipy import sparse

    logits: Floats = theta.astype(dtype)[:, system]
    logits += delta.astype(dtype)[:, question]
    with np.errstate(over="ignore", invalid="ignore"):
        np.negative(logits, out=logits)
        np.exp(logits, out=logits)
    logits += 1.0
    p = np.divide(weight, logits, dtype=dtype)  # sigmoid times the row's weight
    pick = sparse.csr_matrix(
        (np.ones(len(system)), (np.arange(len(system)), system)), shape=(len(system), size)
    ).T.tocsr()
    total = np.asarray(pick @ p.T).T
    mass = np.asarray(pick @ weight.T).T
    with np.errstate(divide="ignore", invalid="ignore"):
        out: Floats = 100.0 * total / mass
    return out


def length_controlled(
    rows: dict[str, Any], draws: Floats, confidence: float, questions: int
) -> LengthControl:
    """The rates of `rows` (`system`: the row's system parameter, `question`, `won`, `lost`
    from the system's side, `own`, `other`: characters) with bootstrap `draws` (replicates
    x questions) over `questions` questions."""
    from scipy import sparse

    system = np.asarray(rows["system"], dtype=np.int64)
    question = np.asarray(rows["question"], dtype=np.int64)
    won, lost = np.asarray(rows["won"], float), np.asarray(rows["lost"], float)
    size = int(rows["systems"])
    x = sparse.csr_matrix((np.ones(len(system)), (np.arange(len(system)), system)),
                          shape=(len(system), size))  # fmt: skip
    terms, names, sd = length_basis(
        np.asarray(rows["own"], float), np.asarray(rows["other"], float)
    )
    k = terms.shape[1]
    # Questions the rows use, renumbered: the per-question term of those only.
    local = np.unique(question, return_inverse=True)[1].ravel()
    estimate = fit(x, won, lost, covariates=terms, question=local).theta
    replicates = fit_bootstrap(x, won, lost, estimate, draws, question, terms, local)
    games = won + lost
    point = _rates(estimate[None, :size], estimate[None, size + k :], system, local,
                   games[None, :], size)[0]  # fmt: skip
    boot = np.vstack([
        np.zeros((0, size)),
        *(_rates(replicates[r : r + 100, :size], replicates[r : r + 100, size + k :], system,
               local, draws[r : r + 100, question] * games[None, :], size, np.float32)
          for r in range(0, len(draws), 100)),
    ])  # fmt: skip
    with np.errstate(divide="ignore", invalid="ignore"):
        logit, boot_logit = np.log(point / (100 - point)), np.log(boot / (100 - boot))
    low, high = interval(logit, boot_logit, confidence, questions)
    lower, upper = 100.0 / (1.0 + np.exp(-low)), 100.0 / (1.0 + np.exp(-high))
    beta = estimate[size : size + k]
    fitted = terms @ beta
    r2 = float(collinear(x, fitted[:, None], games)[0][0]) if np.any(fitted) else 0.0
    return LengthControl(
        rate=point, lower=lower, upper=upper,
        coefficients={n: float(b) for n, b in zip(names, beta, strict=True)},
        r2_systems=r2, identified=r2 < COLLINEAR_R2, sd_length_difference=sd,
    )  # fmt: skip
