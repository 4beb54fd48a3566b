"""Style covariates as Arena-Hard-Auto defines them, read at equal style, and flagged when
the systems (or the other covariates) explain them."""

from __future__ import annotations

import numpy as np
import pytest
from simulated_boards import simulate

from tasks.leaderboard import BoardOptions, rank_flags
from tasks.leaderboard.battles import RULES
from tasks.leaderboard.board import score_rule
from tasks.leaderboard.notes import board_notes
from tasks.leaderboard.style import style_counts, style_covariates

ANSWERS_A = ["# Title\n- one\n- two\n**bold** text here", "plain words only", "1. a\n2. b"]
ANSWERS_B = ["short", "## H\n**x** and __y__ with more words", "- item\nand words"]


def _arena_hard_v2(a: list[str], b: list[str]) -> np.ndarray:
    """Arena-Hard-Auto v2's show_result.py: length (a - b) / (a + b); markdown densities
    count / (length + 1) as (d_a - d_b) / (d_a + d_b + 1); then standardised (it centres
    too; judgeline divides by the root mean square only, checked below)."""
    fa = np.array([style_counts(t) for t in a], dtype=float)
    fb = np.array([style_counts(t) for t in b], dtype=float)
    out = np.zeros_like(fa)
    out[:, 0] = (fa[:, 0] - fb[:, 0]) / (fa[:, 0] + fb[:, 0])
    da, db = fa[:, 1:] / (fa[:, :1] + 1), fb[:, 1:] / (fb[:, :1] + 1)
    out[:, 1:] = (da - db) / (da + db + 1)
    return out


def test_v2_covariates_are_arena_hard_autos_densities_scaled_not_centred() -> None:
    got, names = style_covariates(ANSWERS_A, ANSWERS_B, "v2")
    raw = _arena_hard_v2(ANSWERS_A, ANSWERS_B)
    assert names == ["length", "header_density", "list_density", "bold_density"]
    np.testing.assert_allclose(got, raw / np.sqrt((raw**2).mean(axis=0)), atol=1e-12)
    # equal answers: every covariate exactly 0 (where the controlled score is read)
    same, _ = style_covariates(["# a\n- b", "x y"], ["# a\n- b", "x y z"], "v2")
    assert same[0].tolist() == [0.0] * same.shape[1]


def test_v01_covariates_are_raw_counts() -> None:
    got, names = style_covariates(ANSWERS_A, ANSWERS_B, "v0.1")
    fa = np.array([style_counts(t) for t in ANSWERS_A], dtype=float)
    fb = np.array([style_counts(t) for t in ANSWERS_B], dtype=float)
    raw = (fa - fb) / (fa + fb + 1)  # construct_style_matrices, add_one=True
    assert names == ["length", "headers", "lists", "bold"]
    np.testing.assert_allclose(got, raw / np.sqrt((raw**2).mean(axis=0)), atol=1e-12)


def _styled(battles: object, texts: dict[int, tuple[int, str]]) -> tuple[list[str], list[str]]:
    """Identity A's answer of each pair from its system's (words, markdown); B the
    baseline's, of 40 words, plain."""
    a = [" ".join(["w"] * texts[s][0]) + texts[s][1] for s in battles.pair_a]  # type: ignore[attr-defined]
    return a, [" ".join(["v"] * 40)] * len(a)


def test_style_that_identifies_the_systems_is_flagged_and_its_ranks_not_identified() -> None:
    rng = np.random.default_rng(9)
    battles = simulate(rng, np.array([0.0, 0.8, 0.3, -0.2, -0.6, 0.5]), questions=40, k=2)
    # each system's length constant, one system alone using markdown (the same each time)
    texts = {s: (20 + 15 * s, "") for s in range(1, 6)}
    texts[3] = (65, "\n# head\n- item\n**bold**")
    answers = _styled(battles, texts)
    table = score_rule(
        battles, "reference", BoardOptions(style_control=True, replicates=50), answers
    )
    check = table.style_check
    assert check is not None and not check["identified"]
    assert {"length", "header_density", "list_density", "bold_density"} <= set(check["confounded"])
    assert all(row["rank"] is None for row in table.rows)
    (board,) = leaderboard_of_battles(battles, answers)
    lines = [line for line in board_notes(board) if "not identified" in line]
    assert len(lines) == 1 and "controlled ranks not identified" in lines[0]
    assert board["rank_flags"] == []  # nothing to compare: no rank under style control


def leaderboard_of_battles(battles: object, answers: tuple[list[str], list[str]]) -> list[dict]:
    """The board of `battles` as leaderboard_of makes it, its tables from score_rule."""
    from tasks.leaderboard import _board

    options = BoardOptions(style_control=True, replicates=50)
    tables = {r: score_rule(battles, r, options, answers) for r in RULES}  # type: ignore[arg-type]
    return [_board(battles, tables, "reference", options)]  # type: ignore[arg-type]


def test_varied_style_is_identified_and_read_at_equal_style() -> None:
    """Eight systems as good as the baseline, a judge that prefers the longer answer: the
    controlled scores, read at equal style, centre on the baseline's; centred covariates
    (the pairs' mean style difference) would put them all above it."""
    rng = np.random.default_rng(11)
    questions, size = 300, 9
    battles = simulate(rng, np.zeros(size), questions=questions, k=4)
    words_b = rng.integers(60, 140, len(battles.pair_a))
    factor = np.linspace(0.8, 2.0, size)[battles.pair_a]
    words_a = np.maximum(5, (words_b * factor * np.exp(rng.normal(0, 0.25, len(words_b))))).astype(
        int
    )
    rel = (words_a - words_b) / (words_a + words_b)
    p = 1 / (1 + np.exp(-2.5 * rel))[battles.pair]
    battles = type(battles)(**{**battles.__dict__,
                               "ab": np.where(rng.random(len(p)) < p, "A", "B"),
                               "ba": np.where(rng.random(len(p)) < p, "A", "B")})  # fmt: skip
    answers = ([" ".join(["w"] * n) for n in words_a], [" ".join(["v"] * n) for n in words_b])
    plain = score_rule(battles, "reference", BoardOptions(replicates=50), answers)
    styled = score_rule(
        battles, "reference", BoardOptions(style_control=True, replicates=50), answers
    )
    assert styled.style_check is not None and styled.style_check["identified"]
    rates = np.array([r["bt_win_rate"] for r in styled.rows if not r["baseline"]])
    raw = np.array([r["bt_win_rate"] for r in plain.rows if not r["baseline"]])
    assert raw.mean() > 60  # the judge's bias
    assert abs(rates.mean() - 50) < 2.5 and np.abs(rates - 50).max() < 6
    assert styled.style["length"]["lower"] > 0  # longer is preferred, and it is measured


def test_rank_flags_skip_systems_without_a_rank() -> None:
    rng = np.random.default_rng(2)
    battles = simulate(rng, np.array([0.0, 0.5, -0.5]), questions=20)
    tables = {r: score_rule(battles, r, BoardOptions(replicates=20), None) for r in RULES}
    for table in tables.values():
        for row in table.rows:
            row["rank"] = None if row["system"] == "s1" else row["rank"]
    assert all(f["system"] != "s1" for f in rank_flags(dict(tables), "reference"))
    with pytest.raises(StopIteration):
        next(f for f in rank_flags(dict(tables), "reference") if f["system"] == "s1")
