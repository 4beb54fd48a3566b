"""The length-controlled win rate removes a pure length bias: systems exactly as good as
the baseline, answers of different lengths, a judge that prefers the longer answer. Its
rates are compared with AlpacaEval 2's GLM on the same games, written out from
`alpaca_eval/metrics/glm_winrate.py` (per model; its `length_controlled_minimal` formula,
as the instruction difficulty it adds by default is a file from its hub)."""

from __future__ import annotations

import numpy as np
import pytest

from tasks.leaderboard.battles import Battles, games_under
from tasks.leaderboard.board import BoardOptions, score_rule

pytestmark = pytest.mark.slow

FACTORS = (0.5, 0.7, 0.85, 1.0, 1.15, 1.4, 1.8, 2.5)
"""Each system's typical answer length against the baseline's."""


def _judge(form: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log-odds that the judge prefers answer a (of `a` characters) over b: only length."""
    if form == "difference":  # the shape AlpacaEval's GLM assumes, at another scale
        return 1.5 * np.tanh((a - b) / 1000.0)
    return 1.5 * np.log(a / b)  # a judge that weighs the ratio of the lengths


def length_biased(
    rng: np.random.Generator, form: str, questions: int = 805, k: int = 8
) -> tuple[Battles, tuple[list[str], list[str]]]:
    """Eight systems against the baseline on each of AlpacaEval's 805 questions (identity A the
    system), every call independent, both orders, K seeds; answers of known length."""
    size = len(FACTORS) + 1
    base_len = np.exp(rng.normal(np.log(1500), 0.4, questions)).round() + 20
    own = (
        np.array(FACTORS)[:, None]
        * base_len[None, :]
        * np.exp(rng.normal(0, 0.3, (size - 1, questions)))
    )
    own = own.round() + 20
    pair_a = np.repeat(np.arange(1, size), questions)
    pair_q = np.tile(np.arange(questions), size - 1)
    len_a, len_b = own.ravel(), base_len[pair_q]
    pairs = len(pair_a)
    pair = np.repeat(np.arange(pairs), k)
    # AB shows A first, BA shows B first: the judge sees the same two lengths either way
    p = 1.0 / (1.0 + np.exp(-_judge(form, len_a, len_b)))[pair]
    ab = np.where(rng.random(len(pair)) < p, "A", "B")
    ba = np.where(rng.random(len(pair)) < p, "A", "B")
    battles = Battles(
        judge="sim", config="c", systems=[f"s{i}" for i in range(size)], baseline="s0",
        questions=[f"q{i}" for i in range(questions)], pair_ids=[f"p{i}" for i in range(pairs)],
        pair_a=pair_a, pair_b=np.zeros(pairs, dtype=np.int64), pair_question=pair_q, pair=pair,
        ab=ab, ba=ba, ab_strong=np.zeros(len(pair), bool), ba_strong=np.zeros(len(pair), bool),
    )  # fmt: skip
    answers = (["x" * int(n) for n in len_a], ["y" * int(n) for n in len_b])
    return battles, answers


def alpaca_eval_lc(
    preference: np.ndarray, len_model: np.ndarray, len_baseline: np.ndarray
) -> float:
    """AlpacaEval's length-controlled win rate of one model: its GLM
    `np.tanh(std_delta_len) + not_gamed_baseline.astype(float) - 1` (std_delta_len =
    (len_baseline - len_model) / its sd over this model's annotations), fitted as
    `fit_LogisticRegressionCV` fits it (L1, liblinear, 5 group folds over the duplicated
    rows, continuous labels), predicted at std_delta_len = 0 and averaged."""
    import sklearn
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import GroupKFold

    def logloss_continuous(y_true, y_pred, true_prob, true_sample_weight=None):  # noqa: ANN001, ANN202
        y_true = np.where(y_true == 1, true_prob, 1 - true_prob)
        y_pred = np.clip(y_pred, 1e-15, 1 - 1e-15)
        return -np.mean(y_true * np.log(y_pred) + (1 - y_true) * np.log(1 - y_pred))

    delta = len_baseline - len_model
    x = np.c_[np.tanh(delta / delta.std(ddof=1)), np.ones(len(delta))]
    n = len(x)
    data = np.vstack([x, x])
    label = np.r_[np.ones(n), np.zeros(n)]
    true_prob = np.r_[preference, 1 - preference]
    groups = np.r_[np.arange(n), np.arange(n)]
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = make_scorer(
            logloss_continuous, response_method="predict_proba", greater_is_better=False
        ).set_score_request(true_sample_weight=True, true_prob=True)
        model = LogisticRegressionCV(
            cv=GroupKFold(n_splits=5), scoring=scorer, random_state=123, dual=False,
            l1_ratios=(1.0,), solver="liblinear", fit_intercept=False, use_legacy_attributes=False,
        )  # fmt: skip
        model.set_fit_request(sample_weight=True)
        model.fit(data, label, sample_weight=true_prob, groups=groups,
                  true_sample_weight=None, true_prob=true_prob)  # fmt: skip
        return float(100 * model.predict_proba(np.array([[0.0, 1.0]]))[0, 1])


@pytest.mark.parametrize(("form", "seed"), [("difference", 1), ("ratio", 2)])
def test_a_pure_length_bias_is_removed_better_than_alpaca_evals_glm(form: str, seed: int) -> None:
    battles, answers = length_biased(np.random.default_rng(seed), form)
    options = BoardOptions(length_control=True, replicates=200)
    table = score_rule(battles, "reference", options, answers)
    rows = {r["system"]: r for r in table.rows if not r["baseline"]}
    ours = np.array([rows[f"s{i}"]["lc_win_rate"] for i in range(1, len(FACTORS) + 1)])
    raw = np.array([rows[f"s{i}"]["win_rate"] for i in range(1, len(FACTORS) + 1)])
    games = games_under(battles, "reference")
    # AlpacaEval's annotations: one per (pair, seed) game. Its loss is linear in the label,
    # so a pair's K games count as K annotations of the share it won.
    theirs = []
    chars = [np.array([len(t) for t in side], dtype=float) for side in answers]
    for system in range(1, len(FACTORS) + 1):
        mine = np.flatnonzero(battles.pair_a == system)
        share = games.won[mine] / (games.won[mine] + games.lost[mine])
        repeat = np.repeat(np.arange(len(mine)), 8)
        theirs.append(alpaca_eval_lc(share[repeat], chars[0][mine][repeat], chars[1][mine][repeat]))
    theirs_arr = np.array(theirs)
    print(f"{form}: raw {np.round(raw, 1)}\n ours {np.round(ours, 2)}")
    print(f" AlpacaEval {np.round(theirs_arr, 2)}")
    assert np.abs(raw - 50).max() > 15  # the judge's bias is large
    assert np.abs(ours - 50).max() <= 2.0
    assert np.abs(ours - 50).mean() <= 1.5
    assert np.abs(ours - 50).mean() < np.abs(theirs_arr - 50).mean()
    assert np.abs(ours - 50).max() < np.abs(theirs_arr - 50).max()
    for row in rows.values():  # each interval holds its rate; the bias is gone from them too
        assert row["lc_lower"] <= row["lc_win_rate"] <= row["lc_upper"]
    assert table.length is not None and table.length["identified"]


def test_answers_of_equal_length_leave_the_plain_win_rate() -> None:
    """No length difference: the model is the systems and the per-question term, whose
    likelihood equations make the rate averaged over a system's games its win rate."""
    battles, _ = length_biased(np.random.default_rng(3), "difference", questions=120, k=2)
    answers = (["same"] * len(battles.pair_a), ["size"] * len(battles.pair_a))
    table = score_rule(
        battles, "reference", BoardOptions(length_control=True, replicates=50), answers
    )
    for row in table.rows:
        assert row["lc_win_rate"] == pytest.approx(row["win_rate"], abs=1e-6)
    assert table.length is not None and table.length["coefficients"] == {}
