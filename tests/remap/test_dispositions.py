"""Two-order dispositions and disclosure counts: all 36 outcome pairs, keys, and bad input."""

from __future__ import annotations

import itertools

import pandas as pd
import pyarrow as pa
import pytest

from schemas import DisclosureRow, DispositionRow, arrow_schema
from schemas.vocabulary import OUTCOMES
from tasks.errors import IntegrityError
from tasks.remap.dispositions import compute_disclosure, compute_dispositions

DECISIVE = {"A", "B"}
FAILURES = ["M", "I", "X"]  # worst first


def expected_disposition(ab: str, ba: str) -> str:
    """docs/design.md#dispositions, written independently of the module's lookup table."""
    pair = {ab, ba}
    if pair <= DECISIVE:
        return "stable_" + ab if len(pair) == 1 else "order_conflict"
    if pair == {"T"}:
        return "stable_tie"
    if "T" in pair and pair & DECISIVE and len(pair) == 2:
        return "mixed"
    for failure in FAILURES:
        if failure in pair:
            return "incomplete_" + failure
    raise AssertionError(f"unreachable for {ab}, {ba}")


def grid_outcomes(key: str | None = "A") -> pd.DataFrame:
    """One pair per (AB outcome, BA outcome) code pair, all 36, under one group."""
    rows = []
    for i, (ab, ba) in enumerate(itertools.product(OUTCOMES, OUTCOMES)):
        for order, outcome in (("AB", ab), ("BA", ba)):
            rows.append(
                dict(
                    judge="j",
                    config="c",
                    dataset="d",
                    pair_id=f"p{i:02d}",
                    seed=0,
                    order=order,
                    outcome=outcome,
                    key=key,
                )
            )
    return pd.DataFrame(rows)


def table(outcomes: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(outcomes, preserve_index=False)


def dispositions(outcomes: pd.DataFrame) -> pd.DataFrame:
    return compute_dispositions(table(outcomes)).to_pandas()


def disclosure(outcomes: pd.DataFrame) -> pa.Table:
    return compute_disclosure(table(outcomes), compute_dispositions(table(outcomes)))


def test_all_36_code_pairs_match_the_rule() -> None:
    disp = dispositions(grid_outcomes())
    assert len(disp) == 36
    for row in disp.itertuples():
        assert row.disposition == expected_disposition(row.outcome_ab, row.outcome_ba), row
    counts = disp["disposition"].value_counts().to_dict()
    # 2 stable, 2 conflicts, 1 tie, 4 mixed; failures: M in 11 pairs, I in 9 w/o M, X in 7.
    assert counts == {
        "stable_A": 1,
        "stable_B": 1,
        "order_conflict": 2,
        "stable_tie": 1,
        "mixed": 4,
        "incomplete_M": 11,
        "incomplete_I": 9,
        "incomplete_X": 7,
    }


def test_failures_never_become_ties() -> None:
    disp = dispositions(grid_outcomes())
    with_failure = disp[disp["outcome_ab"].isin(FAILURES) | disp["outcome_ba"].isin(FAILURES)]
    assert len(with_failure) == 36 - 9  # 3 x 3 pairs of A, B, T have no failure
    assert with_failure["disposition"].str.startswith("incomplete_").all()


@pytest.mark.parametrize("key", ["A", "B", None])
def test_correct_is_stable_versus_key_only(key: str | None) -> None:
    disp = dispositions(grid_outcomes(key))
    for row in disp.itertuples():
        if row.disposition in ("stable_A", "stable_B") and key is not None:
            assert row.correct == (row.disposition == f"stable_{key}")
        else:
            assert pd.isna(row.correct)


def test_disclosure_counts_over_the_grid() -> None:
    result = disclosure(grid_outcomes("A"))
    assert result.schema == arrow_schema(DisclosureRow)
    (row,) = result.to_pylist()
    # 72 slots, each code 12 times (6 as AB, 6 as BA).
    assert row["planned"] == 72
    assert row["valid"] == 36
    assert (row["missing"], row["invalid"], row["abstained"], row["tied"]) == (12, 12, 12, 12)
    assert (row["conflicting"], row["mixed"], row["stable"], row["stable_tie"]) == (2, 4, 2, 1)
    assert row["incomplete"] == 27
    assert (row["stable_correct"], row["stable_wrong"]) == (1, 1)
    assert row["consistency"] == pytest.approx(2 / 8)
    assert row["accuracy_of_stable"] == pytest.approx(0.5)


def test_disclosure_groups_and_one_order_cells() -> None:
    outcomes = pd.concat(
        [
            grid_outcomes(None).assign(judge="j1"),
            grid_outcomes(None).assign(judge="j2").query("order == 'AB'"),
        ]
    )
    disp = dispositions(outcomes)
    assert set(disp["judge"]) == {"j1"}  # one order only: no disposition
    rows = {r["judge"]: r for r in disclosure(outcomes).to_pylist()}
    assert rows["j2"]["planned"] == 36 and rows["j2"]["stable"] == 0
    assert rows["j2"]["consistency"] is None and rows["j2"]["accuracy_of_stable"] is None
    assert rows["j1"]["accuracy_of_stable"] is None  # no key: accuracy undefined


def test_dispositions_table_matches_schema() -> None:
    result = compute_dispositions(table(grid_outcomes()))
    assert result.schema == arrow_schema(DispositionRow)
    assert result.num_rows == 36


def test_repeated_cell_is_refused() -> None:
    outcomes = grid_outcomes()
    doubled = pd.concat([outcomes, outcomes.iloc[[0]]])
    with pytest.raises(IntegrityError, match="p00"):
        dispositions(doubled)


def test_unknown_outcome_is_refused() -> None:
    outcomes = grid_outcomes()
    outcomes.loc[0, "outcome"] = "Left"
    with pytest.raises(IntegrityError, match="Left"):
        dispositions(outcomes)


def test_many_rows_are_vectorised() -> None:
    base = grid_outcomes()
    big = pd.concat([base.assign(seed=s) for s in range(2000)], ignore_index=True)
    disp = dispositions(big)
    assert len(disp) == 36 * 2000
    per_seed = disp[disp["seed"] == 0]["disposition"].value_counts()
    assert (disp["disposition"].value_counts() == 2000 * per_seed).all()


def test_outcomes_in_any_order_give_the_same_dispositions() -> None:
    outcomes = pd.concat([grid_outcomes().assign(seed=s) for s in range(3)], ignore_index=True)
    shuffled = outcomes.sample(frac=1.0, random_state=7)
    assert compute_dispositions(table(shuffled)).equals(compute_dispositions(table(outcomes)))
    assert disclosure(shuffled).equals(disclosure(outcomes))
