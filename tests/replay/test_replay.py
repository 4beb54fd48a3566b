"""Replay engine: design properties over exhaustive grids, hand-computed cases, input errors,
the cost to match, and the flow and CLI on real files."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas import ComponentRow, DesignRow, ReplayRow, SummaryRow, conform
from schemas.vocabulary import POLICIES
from tasks.errors import InputError
from tasks.replay.engine import design_policy_pairs, replay, write_replay
from tasks.replay.grid import read_replay_input
from tasks.replay.matching import cost_to_match, upper_envelope

ORDERS = ("AB", "BA")


def table_of(
    grids: list[tuple[str, ...]], keys: list[str | None], judge: str = "judge"
) -> pa.Table:
    """Long replay input for grids given as (seed0 AB, seed0 BA, seed1 AB, ...) outcomes."""
    n, width = len(grids), len(grids[0])
    rows = np.repeat(np.arange(n), width)
    cells = np.tile(np.arange(width), n)
    return pa.table(
        {
            "judge": pa.array([judge] * len(rows)),
            "config": pa.array(["cfg"] * len(rows)),
            "dataset": pa.array(["ds"] * len(rows)),
            "pair_id": pa.array([f"p{i}" for i in rows]),
            "seed": pa.array(cells // 2, pa.int64()),
            "order": pa.array([ORDERS[c % 2] for c in cells]),
            "outcome": pa.array([o for grid in grids for o in grid]),
            "key": pa.array([keys[i] for i in rows], pa.string()),
        }
    )


def rows_by(table: pa.Table, **where: str) -> pd.DataFrame:
    frame = table.to_pandas()
    for column, value in where.items():
        frame = frame[frame[column] == value]
    return frame.set_index("pair_id")


def summary_rows(table: pa.Table, **where: str) -> list[dict]:
    return [r for r in table.to_pylist() if all(r[c] == v for c, v in where.items())]


@pytest.fixture(scope="module")
def exhaustive() -> pa.Table:
    """Every K=4 grid over {A,B,T} and over {A,B,M} (2 x 3^8 pairs), keys cycling A, B, none."""
    grids = [g for alphabet in ("ABT", "ABM") for g in itertools.product(alphabet, repeat=8)]
    keys = [("A", "B", None)[i % 3] for i in range(len(grids))]
    return replay(table_of(grids, keys)).replay


@pytest.fixture(scope="module")
def exhaustive_design() -> pa.Table:
    grids = [g for alphabet in ("ABT", "ABM") for g in itertools.product(alphabet, repeat=8)]
    return replay(table_of(grids, [None] * len(grids)), policies=["full"]).design


# --- docs/design.md#tested-properties, exhaustively ------------------------------------


def test_independent_captures_three_quarters_of_balanced_agreement(
    exhaustive_design: pa.Table,
) -> None:
    agree = {
        d: rows_by(exhaustive_design, design=d)["expected_agreement"]
        for d in ("common", "independent", "balanced")
    }
    lhs = agree["independent"] - agree["common"]
    rhs = 0.75 * (agree["balanced"] - agree["common"])
    assert len(lhs) == 2 * 3**8
    assert (lhs - rhs).abs().max() < 1e-12
    # Not vacuous: the designs do differ on many grids.
    assert (lhs.abs() > 0.1).sum() > 1000


@pytest.mark.parametrize("k", [2, 6])
def test_independent_captures_k_minus_one_over_k_at_other_k(k: int) -> None:
    # The report's designs lead states this share for the run's K.
    rng = np.random.default_rng(k)
    grids = [tuple(rng.choice(list("ABT"), size=2 * k)) for _ in range(300)]
    design = replay(table_of(grids, [None] * len(grids)), policies=["full"]).design
    agree = {
        d: rows_by(design, design=d)["expected_agreement"]
        for d in ("common", "independent", "balanced")
    }
    lhs = agree["independent"] - agree["common"]
    rhs = (k - 1) / k * (agree["balanced"] - agree["common"])
    assert (lhs - rhs).abs().max() < 1e-12
    assert (lhs.abs() > 0.05).sum() > 30


def test_nonstrict_preserves_expected_score(exhaustive: pa.Table) -> None:
    for design in ("common", "independent", "balanced"):
        nonstrict = rows_by(exhaustive, design=design, policy="nonstrict")
        full = rows_by(exhaustive, design=design, policy="full")
        gap = (nonstrict["expected_score"] - full["expected_score"]).abs()
        assert gap.max() < 1e-12
        assert (nonstrict["expected_score"] - nonstrict["reference_score"]).abs().max() < 1e-12
        assert nonstrict["p_change"].max() > 0.5  # it does change decisions


def test_hard_labels_added_variance_is_quarter_of_p_change() -> None:
    grids = list(itertools.product("AB", repeat=8))
    result = replay(table_of(grids + grids, ["A"] * len(grids) + ["B"] * len(grids)))
    for design in ("common", "independent", "balanced"):
        rows = rows_by(result.replay, design=design, policy="nonstrict")
        assert (rows["added_variance"] - rows["p_change"] / 4).abs().max() < 1e-12
        assert rows["added_variance"].max() > 0


def test_paired_unanimity_changes_at_most_half_of_nonstrict_at_k4(exhaustive: pa.Table) -> None:
    """The per-pair half bound, over every K = 4 grid (docs/design.md#tested-properties)."""
    unanimity = rows_by(exhaustive, design="balanced", policy="paired_unanimity")["p_change"]
    nonstrict = rows_by(exhaustive, design="balanced", policy="nonstrict")["p_change"]
    assert (unanimity <= nonstrict / 2 + 1e-12).all()
    assert unanimity.max() > 0  # the bound is tight on some grids, not trivially zero
    assert ((unanimity - nonstrict / 2).abs() < 1e-12).sum() > 0


def test_paired_unanimity_changes_at_most_half_of_nonstrict_at_k2() -> None:
    """At K = 2 the one couple is the whole reference: paired unanimity changes nothing."""
    grids = list(itertools.product("ABT", repeat=4))
    result = replay(table_of(grids, [None] * len(grids)), designs=["balanced"]).replay
    unanimity = rows_by(result, policy="paired_unanimity")["p_change"]
    assert unanimity.abs().max() == 0.0
    assert rows_by(result, policy="nonstrict")["p_change"].max() == 1.0


def test_the_half_bound_fails_at_k6_and_paired_unanimity_reverses() -> None:
    """docs/design.md#scope-of-the-half-bound: seeds as (AB, BA) AA AA AA AA AB BA. nonstrict
    never changes it; paired unanimity stops on B B when seed 5 is in AB, seed 4 in BA and they
    are the first couple (3/6 x 3/5 x 1/9 = 1/30), against a reference of 4 A to 2 B."""
    grid = ("A", "A") * 4 + ("A", "B", "B", "A")
    result = replay(table_of([grid], [None]), designs=["balanced"], policies=POLICIES).replay
    nonstrict = rows_by(result, policy="nonstrict").iloc[0]
    assert nonstrict["p_change"] == 0.0
    for policy in ("paired_unanimity", "paired_strict", "paired_nonstrict"):
        row = rows_by(result, policy=policy).iloc[0]
        assert row["p_change"] == pytest.approx(1 / 30, abs=1e-15)
        assert row["p_reversal"] == pytest.approx(1 / 30, abs=1e-15)
        assert row["p_change"] > nonstrict["p_change"] / 2


@pytest.mark.parametrize("k", [2, 4])
def test_paired_policies_never_reverse_a_decision_up_to_k4(k: int) -> None:
    """At K = 4 a unanimous couple is 2 of 4 votes: the other two can tie it, not beat it."""
    grids = list(itertools.product("ABT", repeat=2 * k))
    paired = [p for p in POLICIES if p.startswith("paired")]
    result = replay(table_of(grids, [None] * len(grids)), designs=["balanced"], policies=paired)
    frame = result.replay.to_pandas()
    assert frame["p_reversal"].abs().max() == 0.0
    assert frame["p_change"].max() > 0 or k == 2


def test_strict_never_changes_a_decision(exhaustive: pa.Table) -> None:
    strict = exhaustive.to_pandas().query("policy == 'strict'")
    for column in ("p_change", "p_neutral_to_decisive", "p_decisive_to_neutral", "p_reversal"):
        assert strict[column].abs().max() < 1e-12
    assert strict["added_variance"].abs().max() < 1e-12
    assert strict["expected_calls"].min() < 4  # while still stopping early


@pytest.mark.parametrize("k", [2, 4, 6])
def test_left_slot_judge_never_stops_early_under_paired_unanimity(k: int) -> None:
    left = tuple(o for _ in range(k) for o in ("A", "B"))  # Left every time: A in AB, B in BA
    right = tuple(o for _ in range(k) for o in ("B", "A"))
    result = replay(table_of([left, right], ["A", None]))
    rows = rows_by(result.replay, design="balanced", policy="paired_unanimity")
    assert rows["expected_calls"].tolist() == [float(k), float(k)]
    assert rows["p_change"].tolist() == [0.0, 0.0]
    # The same judge does stop early under nonstrict, so the check has teeth (K > 2).
    nonstrict = rows_by(result.replay, design="balanced", policy="nonstrict")
    assert (nonstrict["expected_calls"] < k).all() or k == 2


# --- hand-computed cases -----------------------------------------------------------------


def test_hand_computed_k2_pair() -> None:
    # Seed 0: AB->A, BA->B; seed 1: AB->A, BA->A; key A.
    # common: all-AB reference (A, A) -> A (score 1); all-BA (B, A) -> N (score 0.5).
    #   reference score (1 + 0.5)/2 = 0.75, P(neutral) 1/2, agreement (1 + 0)/2 = 1/2.
    #   nonstrict (K=2): after call 1 the margin 1 >= 1, so it always stops after 1 call.
    #   On (A, A) it says A (no change). On (B, A) it says B or A with 1/2 each, against a
    #   neutral reference: P(change) 1, all neutral->decisive, score mean 0.5, variance 1/4.
    #   So expected_calls 1, p_change 1/2, score 0.75, added variance (0 + 1/4)/2 = 1/8.
    #   strict: margin 1 > 1 fails, so both calls always run: expected_calls 2.
    # balanced: (s0 AB, s1 BA) -> (A, A) -> A; (s0 BA, s1 AB) -> (B, A) -> N.
    #   paired_unanimity (K=2, one couple): (A, A) stops with A; (B, A) runs both -> N.
    #   Always 2 calls, never a change.
    # k-subset agreement under common: k=1 -> (1 + 0)/2 = 1/2; k=2 -> 1. Nonstrict's
    #   agreement is 1 - 1/2 = 1/2, reached by k=1 alone: match cost 1, match extra 0.
    grid = ("A", "B", "A", "A")
    result = replay(table_of([grid], ["A"]))
    row = rows_by(result.replay, design="common", policy="nonstrict").loc["p0"]
    assert row["expected_calls"] == pytest.approx(1.0, abs=1e-12)
    assert row["p_change"] == pytest.approx(0.5, abs=1e-12)
    assert row["p_neutral_to_decisive"] == pytest.approx(0.5, abs=1e-12)
    assert row["p_decisive_to_neutral"] == 0 and row["p_reversal"] == 0
    assert row["expected_score"] == pytest.approx(0.75, abs=1e-12)
    assert row["reference_score"] == pytest.approx(0.75, abs=1e-12)
    assert row["added_variance"] == pytest.approx(0.125, abs=1e-12)
    strict = rows_by(result.replay, design="common", policy="strict").loc["p0"]
    assert strict["expected_calls"] == 2.0
    pu = rows_by(result.replay, design="balanced", policy="paired_unanimity").loc["p0"]
    assert (pu["expected_calls"], pu["p_change"]) == (2.0, 0.0)
    design = rows_by(result.design, design="common").loc["p0"]
    assert design["expected_score"] == pytest.approx(0.75, abs=1e-12)
    assert design["p_neutral"] == pytest.approx(0.5, abs=1e-12)
    assert design["expected_agreement"] == pytest.approx(0.5, abs=1e-12)
    # The components behind that match cost: k=1 agrees half the time, k=2 always; the
    # balanced pair is the balanced reference itself when K=2.
    comps = {
        (r["design"], r["component"]): (r["cost"], r["agreement"])
        for r in result.components.to_pylist()
    }
    assert comps[("common", "k=1")] == (1.0, pytest.approx(0.5, abs=1e-12))
    assert comps[("common", "k=2")] == (2.0, pytest.approx(1.0, abs=1e-12))
    assert comps[("balanced", "balanced pair")] == (2.0, pytest.approx(1.0, abs=1e-12))
    assert ("common", "balanced pair") not in comps
    (summary,) = summary_rows(result.summary, design="common", policy="nonstrict")
    assert summary["match_cost"] == pytest.approx(1.0, abs=1e-12)
    assert summary["match_extra"] == pytest.approx(0.0, abs=1e-12)
    assert summary["savings"] == pytest.approx(0.5, abs=1e-12)


def test_hand_computed_k4_three_to_one() -> None:
    # Each seed gives the same outcome in both orders: A, A, A, B. Every assignment's
    # reference is {A, A, A, B}, decision A, key B -> reference score 0.
    # nonstrict: after 2 calls the margin is 2 >= 2 iff both were A: P = 3/4 * 2/3 = 1/2;
    #   otherwise the margin is 0 and after call 3 it is 1 >= 1: E calls 0.5*2 + 0.5*3 = 2.5.
    # strict: stop after 3 calls iff all three were A (3 > 1): P = 3/4 * 2/3 * 1/2 = 1/4;
    #   otherwise 4 calls: E calls 0.25*3 + 0.75*4 = 3.75.
    # paired_unanimity: the B seed sits on one side; P(first couple both A) = 1*2/4 = 1/2
    #   either way: E calls 0.5*2 + 0.5*4 = 3. No policy changes the decision.
    grid = ("A", "A", "A", "A", "A", "A", "B", "B")
    result = replay(table_of([grid], ["B"]))
    expect = {"full": 4.0, "nonstrict": 2.5, "strict": 3.75, "paired_unanimity": 3.0}
    rows = result.replay.to_pylist()
    assert len(rows) == 10  # 3 designs x 3 policies + paired_unanimity under balanced
    for row in rows:
        assert row["expected_calls"] == pytest.approx(expect[row["policy"]], abs=1e-12)
        assert row["p_change"] == pytest.approx(0.0, abs=1e-12)
        assert row["expected_score"] == pytest.approx(0.0, abs=1e-12)


def test_cost_to_match_on_a_hand_made_envelope() -> None:
    costs = [1, 2, 2, 3, 4]
    agreements = [0.6, 0.7, 0.8, 0.9, 1.0]
    # (2, 0.7) lies under (2, 0.8); (3, 0.9) lies on the chord from (2, 0.8) to (4, 1.0).
    assert upper_envelope(costs, agreements) == [(1, 0.6), (2, 0.8), (4, 1.0)]
    assert cost_to_match(costs, agreements, 0.5) == 1  # the cheapest component suffices
    assert cost_to_match(costs, agreements, 0.7) == pytest.approx(1.5)  # halfway to (2, .8)
    assert cost_to_match(costs, agreements, 0.85) == pytest.approx(2.5)  # 2 + .05/.2 * 2
    assert cost_to_match(costs, agreements, 1.0) == pytest.approx(4.0)
    # A cheap component can beat a dearer one: the envelope runs (1, .9) -> (4, 1).
    assert upper_envelope([1, 2, 4], [0.9, 0.5, 1.0]) == [(1, 0.9), (4, 1.0)]
    assert cost_to_match([1, 2, 4], [0.9, 0.5, 1.0], 0.95) == pytest.approx(2.5)
    assert np.isnan(cost_to_match([1, 2], [0.5, 0.6], 0.9))


# --- inputs, selection and errors --------------------------------------------------------


def good_rows(k: int = 4, pairs: int = 2) -> list[dict]:
    return [
        {
            "judge": "j",
            "config": "c",
            "dataset": "d",
            "pair_id": f"p{p}",
            "seed": s,
            "order": o,
            "outcome": "AB"[(p + s) % 2],
            "key": "A",
        }
        for p in range(pairs)
        for s in range(k)
        for o in ORDERS
    ]


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            lambda r: [x for x in r if not (x["pair_id"] == "p1" and x["seed"] == 2)],
            ["'p1'", "missing seed 2 order AB", "missing seed 2 order BA"],
        ),
        (
            lambda r: [
                x for x in r if not (x["pair_id"] == "p1" and x["seed"] == 3 and x["order"] == "BA")
            ],
            ["'p1'", "missing seed 3 order BA"],
        ),
        (lambda r: r + [dict(r[9])], ["'p1'", "duplicate seed 0 order BA (2 rows)"]),
        (
            lambda r: [{**x, "outcome": "Q"} if i == 5 else x for i, x in enumerate(r)],
            ["'p0'", "outcome 'Q'", "row 6"],
        ),
        (
            lambda r: [{**x, "order": "LR"} if i == 12 else x for i, x in enumerate(r)],
            ["'p1'", "order 'LR'"],
        ),
        (
            lambda r: [{**x, "key": "B"} if i == 15 else x for i, x in enumerate(r)],
            ["'p1'", "disagree on the key"],
        ),
        (lambda r: [x for x in r if x["seed"] != 3], ["judge='j'", "K = 3", "even K"]),
        (
            lambda r: [{**x, "seed": 7} if x["seed"] == 3 else x for x in r],
            ["seeds [0, 1, 2, 7] are not 0..3"],
        ),
    ],
    ids=[
        "missing-seed",
        "missing-order",
        "duplicate",
        "bad-code",
        "bad-order",
        "key-clash",
        "odd-k",
        "seed-gap",
    ],
)
def test_bad_input_names_the_pair_and_the_problem(change, says: list[str]) -> None:  # type: ignore[no-untyped-def]
    table = pa.Table.from_pylist(change(good_rows()))
    with pytest.raises(InputError) as caught:
        replay(table, where="calls.parquet")
    message = str(caught.value)
    assert message.startswith("calls.parquet")
    for piece in says:
        assert piece in message, message


def test_missing_column_is_named() -> None:
    table = pa.Table.from_pylist(good_rows()).drop_columns(["order"])
    with pytest.raises(InputError, match=r"missing columns \['order'\]"):
        replay(table)


def test_groups_with_different_k_in_one_input() -> None:
    rows = good_rows(k=4) + [{**r, "judge": "j2"} for r in good_rows(k=2, pairs=3)]
    result = replay(pd.DataFrame(rows))  # a pandas frame works as well
    full = summary_rows(result.summary, policy="full", design="balanced")
    assert sorted((r["judge"], r["expected_calls"], r["pairs"]) for r in full) == [
        ("j", 4.0, 2),
        ("j2", 2.0, 3),
    ]
    assert result.replay.num_rows == (2 + 3) * 10
    assert result.design.num_rows == (2 + 3) * 3


def test_outcome_row_table_is_read_by_its_first_eight_columns(tmp_path: Path) -> None:
    base = pa.Table.from_pylist(good_rows())
    extra = base.append_column("presentation_id", pa.array(["x"] * base.num_rows))
    extra = extra.append_column("label", pa.array(["Left"] * base.num_rows))
    path = tmp_path / "outcomes.parquet"
    pq.write_table(extra, path)
    from_file = replay(read_replay_input(path))
    assert from_file.replay.equals(replay(base).replay)


def test_selection_leaves_out_undefined_designs() -> None:
    assert design_policy_pairs(["common"], ["full", "paired_unanimity"]) == [("common", "full")]
    assert design_policy_pairs(["balanced", "common"], ["paired_unanimity", "strict"]) == [
        ("common", "strict"),
        ("balanced", "strict"),
        ("balanced", "paired_unanimity"),
    ]
    with pytest.raises(InputError, match="paired_unanimity needs balanced"):
        design_policy_pairs(["common"], ["paired_unanimity"])
    with pytest.raises(InputError, match="unknown design or policy"):
        design_policy_pairs(["sometimes"], ["full"])
    result = replay(
        pa.Table.from_pylist(good_rows()), designs=["independent"], policies=["nonstrict"]
    )
    assert set(result.replay.column("design").to_pylist()) == {"independent"}
    assert set(result.replay.column("policy").to_pylist()) == {"nonstrict"}


def test_written_tables_conform_to_their_schemas(tmp_path: Path) -> None:
    result = replay(pa.Table.from_pylist(good_rows()))
    paths = write_replay(result, tmp_path / "out")
    models = {
        "replay": ReplayRow,
        "summary": SummaryRow,
        "design": DesignRow,
        "components": ComponentRow,
    }
    for name, model in models.items():
        table = pq.read_table(paths[name])
        assert conform(table, model, where=name).num_rows == getattr(result, name).num_rows


# --- flow and CLI ------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_replay_runs_the_flow(
    prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    base = pa.Table.from_pylist(good_rows())
    calls = tmp_path / "outcomes.parquet"
    pq.write_table(base, calls)
    out = tmp_path / "replay"
    monkeypatch.setenv("COLUMNS", "250")
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "--work-dir",
            str(tmp_path / "work"),
            "replay",
            "--calls",
            str(calls),
            "--out",
            str(out),
            "--design",
            "balanced",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "paired_unanimity" in result.output and "replay summary" in result.output
    summary = pq.read_table(out / "summary.parquet")
    assert summary.equals(replay(base, designs=["balanced"]).summary)
    assert (out / "replay.parquet").is_file() and (out / "design.parquet").is_file()

    missing = runner.invoke(
        app, ["replay", "--calls", str(tmp_path / "nope.parquet"), "--out", str(out)]
    )
    assert isinstance(missing.exception, InputError)
    assert "nope.parquet" in str(missing.exception)
