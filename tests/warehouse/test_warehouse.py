"""The DuckDB warehouse: views over real parquet files, run ids from paths, report queries."""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from schemas import (
    DisclosureRow,
    DispositionRow,
    ManifestRow,
    OutcomeRow,
    ReplayRow,
    ReplyRecord,
    SummaryRow,
    arrow_schema,
    rows_to_table,
)
from tasks.bootstrap import bootstrap_interval
from tasks.errors import InputError, IntegrityError
from tasks.remap.dispositions import compute_disclosure, compute_dispositions
from tasks.storage import write_parquet_atomic
from tasks.store.workdir import WorkDir
from tasks.warehouse import (
    VIEWS,
    build_warehouse,
    check_run_tables,
    query,
    report_names,
)

GROUP = dict(judge="j", config="c", dataset="d")


def replay_rows(run_seed: int, pairs: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(run_seed)
    rows = []
    for i, (design, policy) in itertools.product(
        range(pairs), [("common", "full"), ("common", "nonstrict"), ("balanced", "strict")]
    ):
        rows.append(
            dict(
                **GROUP,
                pair_id=f"p{i:03d}",
                design=design,
                policy=policy,
                expected_calls=float(rng.uniform(1, 4)),
                p_change=0.2,
                p_neutral_to_decisive=0.05,
                p_decisive_to_neutral=0.1,
                p_reversal=0.05,
                expected_score=float(rng.uniform(0, 1)),
                reference_score=0.5,
                added_variance=float(rng.uniform(0, 0.05)),
            )
        )
    return rows


def summary_rows(replay: pd.DataFrame) -> list[dict[str, object]]:
    rows = []
    for (design, policy), g in replay.groupby(["design", "policy"]):
        rows.append(
            dict(
                **GROUP,
                design=design,
                policy=policy,
                pairs=len(g),
                **{
                    c: float(g[c].mean())
                    for c in (
                        "expected_calls",
                        "p_change",
                        "p_neutral_to_decisive",
                        "p_decisive_to_neutral",
                        "p_reversal",
                        "expected_score",
                        "reference_score",
                        "added_variance",
                    )
                },
                savings=1 - float(g["expected_calls"].mean()) / 4,
                match_cost=None if policy == "full" else 3.5,
                match_extra=None if policy == "full" else 0.25,
            )
        )
    return rows


def outcome_rows(ab_ba: list[tuple[str, str, str, str]]) -> list[dict[str, object]]:
    """(pair, outcome AB, outcome BA, key) to OutcomeRows with labels as the map implies."""
    slot = {("AB", "A"): "Left", ("AB", "B"): "Right", ("BA", "A"): "Right", ("BA", "B"): "Left"}
    other = {"T": "Tie", "X": "Abstain", "I": "Invalid", "M": None}
    rows = []
    for pair_id, ab, ba, key in ab_ba:
        for order, outcome in (("AB", ab), ("BA", ba)):
            rows.append(
                dict(
                    **GROUP,
                    pair_id=pair_id,
                    seed=0,
                    order=order,
                    outcome=outcome,
                    key=key,
                    presentation_id=f"{pair_id}-{order}",
                    call_key=f"k-{pair_id}-{order}",
                    label=slot.get((order, outcome), other.get(outcome)),
                )
            )
    return rows


# Left twice (A then B) x3, Right twice (B then A) x1, one stable A, one mixed, one missing.
CELLS = [
    ("c1", "A", "B", "A"),
    ("c2", "A", "B", "A"),
    ("c3", "A", "B", "B"),
    ("c4", "B", "A", "A"),
    ("c5", "A", "A", "A"),
    ("c6", "T", "A", "A"),
    ("c7", "M", "B", "A"),
]


def write_run(work: WorkDir, run_id: str, run_seed: int, pairs: int = 40) -> pd.DataFrame:
    folder = work.run_dir(run_id)
    replay = rows_to_table(replay_rows(run_seed, pairs), ReplayRow)
    write_parquet_atomic(replay, folder / "replay.parquet")
    summary = rows_to_table(summary_rows(replay.to_pandas()), SummaryRow)
    write_parquet_atomic(summary, folder / "summary.parquet")
    outcomes = rows_to_table(outcome_rows(CELLS), OutcomeRow)
    write_parquet_atomic(outcomes, folder / "outcomes.parquet")
    disp = compute_dispositions(outcomes)
    write_parquet_atomic(disp, folder / "dispositions.parquet")
    disclosure = compute_disclosure(outcomes, disp)
    write_parquet_atomic(disclosure, folder / "disclosure.parquet")
    return replay.to_pandas()


@pytest.fixture
def two_runs(work: WorkDir) -> tuple[WorkDir, pd.DataFrame]:
    replay = write_run(work, "run-1", 1)
    write_run(work, "run-2", 2, pairs=10)
    build_warehouse(work)
    return work, replay


def test_every_stage_table_is_a_relation(two_runs: tuple[WorkDir, pd.DataFrame]) -> None:
    work, _ = two_runs
    con = duckdb.connect(str(work.warehouse), read_only=True)
    try:
        for view in VIEWS:
            count = con.execute(f'SELECT count(*) FROM "{view.name}"').fetchall()[0][0]
            assert isinstance(count, int)
        runs = con.execute(
            "SELECT run_id, count(*) FROM replay GROUP BY run_id ORDER BY run_id"
        ).fetchall()
        assert runs == [("run-1", 40 * 3), ("run-2", 10 * 3)]
        # A stage with no files yet is an empty table with its schema's columns.
        cols = [r[0] for r in con.execute("DESCRIBE labels").fetchall()]
        assert cols[:3] == ["run_id", "call_key", "template_id"]
        assert con.execute("SELECT count(*) FROM labels").fetchall() == [(0,)]
    finally:
        con.close()


def test_scores_match_an_independent_computation(two_runs: tuple[WorkDir, pd.DataFrame]) -> None:
    work, replay = two_runs
    scores = query(work, "report_scores", run_id="run-1")
    assert len(scores) == 3
    for row in scores.to_dict("records"):
        g = replay[(replay["design"] == row["design"]) & (replay["policy"] == row["policy"])]
        assert row["pairs"] == 40
        assert row["score"] == pytest.approx(g["expected_score"].mean())
        assert row["expected_calls"] == pytest.approx(g["expected_calls"].mean())
        assert row["score_added_variance"] == pytest.approx(g["added_variance"].sum() / 40**2)
        assert row["savings"] == pytest.approx(1 - g["expected_calls"].mean() / 4)
        assert row["ci_low"] < row["score"] < row["ci_high"]
        # The percentile interval is close to mean +- 1.96 standard errors.
        se = g["expected_score"].std(ddof=0) / np.sqrt(40)
        assert row["ci_high"] - row["ci_low"] == pytest.approx(2 * 1.96 * se, rel=0.15)
        if row["policy"] == "full":
            assert pd.isna(row["match_cost"])
        else:
            assert row["match_cost"] == 3.5 and row["match_extra"] == 0.25
    again = query(work, "report_scores", run_id="run-1")
    pd.testing.assert_frame_equal(scores, again)
    other = query(work, "report_scores", run_id="run-2")
    assert set(other["pairs"]) == {10}


def test_bootstrap_is_deterministic_and_sized() -> None:
    values = np.linspace(0, 1, 101)
    a = bootstrap_interval(values, seed_parts=("g",))
    assert a == bootstrap_interval(values, seed_parts=("g",))
    assert a != bootstrap_interval(values, seed_parts=("h",))
    assert a[0] < 0.5 < a[1]
    assert bootstrap_interval(np.array([0.7]), seed_parts=("g",)) == (0.7, 0.7)
    wide = bootstrap_interval(values[::10], seed_parts=("g",))
    assert wide[1] - wide[0] > a[1] - a[0]  # fewer pairs, wider interval


def test_bootstrap_depends_on_the_data_not_on_the_run_id(work: WorkDir) -> None:
    write_run(work, "run-a", 1)
    write_run(work, "run-b", 1)  # the same outcomes under another run id
    write_run(work, "run-c", 3)  # other outcomes
    build_warehouse(work)
    bounds = {
        r: query(work, "report_scores", run_id=r)[["ci_low", "ci_high"]].to_numpy().tolist()
        for r in ("run-a", "run-b", "run-c")
    }
    assert bounds["run-a"] == bounds["run-b"]
    assert bounds["run-a"] != bounds["run-c"]


def test_disclosure_query_returns_the_written_counts(
    two_runs: tuple[WorkDir, pd.DataFrame],
) -> None:
    work, _ = two_runs
    (row,) = query(work, "report_disclosure", run_id="run-1").to_dict("records")
    assert list(row)[: len(DisclosureRow.model_fields)] == list(DisclosureRow.model_fields)
    assert (row["planned"], row["valid"], row["missing"]) == (14, 13, 1)
    assert (row["conflicting"], row["stable"], row["mixed"], row["incomplete"]) == (4, 1, 1, 1)
    assert (row["stable_correct"], row["stable_wrong"]) == (1, 0)
    assert row["consistency"] == pytest.approx(1 / 6)


def test_position_bias_counts_slots_of_conflicts(two_runs: tuple[WorkDir, pd.DataFrame]) -> None:
    work, _ = two_runs
    (row,) = query(work, "report_position_bias", run_id="run-1").to_dict("records")
    assert (row["conflicts"], row["left_left"], row["right_right"]) == (4, 3, 1)
    assert row["same_slot_share"] == 1.0  # by construction
    assert row["left_share_of_conflicts"] == pytest.approx(0.75)
    # Decisive calls: 4 conflicts x 2 + stable 2 + mixed 1 + the B beside the M = 12;
    # Left won in c1-c3 twice (6), c4 none, c5 AB, c6 none, c7 BA's B is Left -> 8.
    assert (row["decisive_calls"], row["left_wins"]) == (12, 8)


def test_other_report_queries_run(two_runs: tuple[WorkDir, pd.DataFrame]) -> None:
    work, _ = two_runs
    assert set(report_names()) >= {
        "report_scores",
        "report_disclosure",
        "report_position_bias",
        "report_summary",
        "report_design",
    }
    summary = query(work, "report_summary", run_id="run-2")
    assert list(summary.columns) == list(SummaryRow.model_fields)
    assert len(summary) == 3
    assert query(work, "report_design", run_id="run-1").empty  # no design.parquet written


def test_replies_keep_the_earliest_copy(work: WorkDir) -> None:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for i, text in enumerate(["first", "second"]):
        row = ReplyRecord(
            call_key="k1",
            provider="sim",
            model="m",
            raw_reply=text,
            latency_ms=1.0,
            received_at=t0 + dt.timedelta(seconds=i),
        )
        write_parquet_atomic(rows_to_table([row], ReplyRecord), work.replies / f"{9 - i}.parquet")
    build_warehouse(work)
    con = duckdb.connect(str(work.warehouse), read_only=True)
    try:
        assert con.execute("SELECT raw_reply FROM replies").fetchall() == [("first",)]
    finally:
        con.close()


def test_awkward_work_dir_paths(tmp_path: Path) -> None:
    """A quote in the work dir's path is quoted safely; glob characters are refused rather
    than letting DuckDB read a neighbouring folder through them."""
    work = WorkDir(tmp_path / "it's a work dir")
    write_run(work, "run-1", 1, pairs=5)
    build_warehouse(work)
    assert set(query(work, "report_scores", run_id="run-1")["pairs"]) == {5}
    globby = WorkDir(tmp_path / "it's [a] work dir")
    write_run(globby, "run-1", 2, pairs=7)
    with pytest.raises(InputError, match="glob character"):
        build_warehouse(globby)


def test_bad_query_names_and_parameters(two_runs: tuple[WorkDir, pd.DataFrame]) -> None:
    work, _ = two_runs
    with pytest.raises(InputError, match="no report query 'report_nope'"):
        query(work, "report_nope", run_id="run-1")
    with pytest.raises(InputError, match="report_scores"):
        query(work, "report_scores")
    # Parameters are bound: a hostile value is just a run id that matches nothing.
    assert query(work, "report_disclosure", run_id="x' OR '1'='1").empty


def test_rebuild_sees_new_runs(work: WorkDir) -> None:
    build_warehouse(work)
    assert query(work, "report_disclosure", run_id="run-1").empty
    write_run(work, "run-1", 1, pairs=3)
    # The disclosure stage was an empty table: query notices its files and rebuilds.
    assert len(query(work, "report_disclosure", run_id="run-1")) == 1
    write_run(work, "run-2", 2, pairs=3)  # a glob view sees a new run without a rebuild
    assert len(query(work, "report_disclosure", run_id="run-2")) == 1
    assert not list(work.root.glob(".warehouse.*"))  # no temporary files left


def test_queries_in_one_read_check_the_files_once(
    work: WorkDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasks.warehouse as warehouse

    write_run(work, "run-1", 1, pairs=3)
    warehouse.build_warehouse(work)  # a file to check (a read alone makes none)
    checks: list[Path] = []
    stale = warehouse._stale
    monkeypatch.setattr(warehouse, "_stale", lambda w, p: checks.append(p) or stale(w, p))
    with warehouse.warehouse_reads(work):
        for _ in range(3):
            assert len(query(work, "report_disclosure", run_id="run-1")) == 1
    assert len(checks) == 1  # one check on entry
    checks.clear()
    query(work, "report_disclosure", run_id="run-1")
    query(work, "report_disclosure", run_id="run-1")
    assert len(checks) == 2  # outside a read, every query checks


def test_a_read_answers_a_repeated_query_once_and_nested_reads_are_one(
    work: WorkDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasks.warehouse as warehouse

    write_run(work, "run-1", 1, pairs=3)
    write_run(work, "run-2", 2, pairs=4)
    ran: list[str] = []
    run_query = warehouse._run_query
    monkeypatch.setattr(
        warehouse,
        "_run_query",
        lambda con, name, params: ran.append(name) or run_query(con, name, params),
    )
    with warehouse.warehouse_reads(work):
        first = query(work, "report_scores", run_id="run-1")
        first.loc[:, "score"] = -1.0  # a caller's change never reaches the next answer
        with warehouse.warehouse_reads(work):
            again = query(work, "report_scores", run_id="run-1")
        other = query(work, "report_scores", run_id="run-2")
    assert ran == ["report_scores", "report_scores"]  # run-1 once, run-2 once
    assert (again["score"] >= 0).all() and not again.equals(other)


def test_dispositions_view_keeps_schema_columns(two_runs: tuple[WorkDir, pd.DataFrame]) -> None:
    work, _ = two_runs
    con = duckdb.connect(str(work.warehouse), read_only=True)
    try:
        cols = [r[0] for r in con.execute("DESCRIBE dispositions").fetchall()]
    finally:
        con.close()
    assert cols == ["run_id", *DispositionRow.model_fields]


def test_a_damaged_run_file_leaves_the_other_runs_readable(
    two_runs: tuple[WorkDir, pd.DataFrame], caplog: pytest.LogCaptureFixture
) -> None:
    work, _ = two_runs
    damaged = work.run_dir("run-1") / "outcomes.parquet"
    with damaged.open("r+b") as f:
        f.truncate(300)
    with caplog.at_level(logging.WARNING, logger="tasks.warehouse"):
        disclosure = query(work, "report_disclosure", run_id="run-2")  # rebuilds: files changed
    assert len(disclosure) == 1
    assert not query(work, "report_scores", run_id="run-2").empty
    assert any(str(damaged) in r.getMessage() for r in caplog.records)
    check_run_tables(work, "run-2")
    with pytest.raises(IntegrityError, match="run-1.*damaged.*outcomes.parquet"):
        check_run_tables(work, "run-1")


def test_advice_from_before_certificates_names_the_command_that_rewrites_it(
    two_runs: tuple[WorkDir, pd.DataFrame],
) -> None:
    """An advice table written before certificates lacks their columns: the run's report is
    refused with deleting it, not remap, as the way to repair it (no command writes advice
    but a live run that follows it)."""
    work, _ = two_runs
    old = pa.table({"judge": ["j"], "config": ["c"], "rank": ["advised"], "policy": ["strict"],
                    "rng_seed": [0], "holdout_savings": [0.2], "note": ["held out"]})  # fmt: skip
    pq.write_table(old, work.run_dir("run-1") / "advice.parquet")
    with pytest.raises(IntegrityError, match=r"advice.parquet \(missing columns") as caught:
        check_run_tables(work, "run-1")
    assert "its advice.parquet holds no result" in str(caught.value)
    assert "delete it; `judgeline advise` prints advice again" in str(caught.value)
    assert "judgeline remap" not in str(caught.value)
    check_run_tables(work, "run-2")


def test_a_folder_being_staged_is_not_in_the_warehouse(work: WorkDir) -> None:
    """A manifest being frozen sits in `manifests/.staging-*` until its publisher renames it
    away: a warehouse built meanwhile must not name its file, or every later query fails
    when the file is gone."""
    write_run(work, "run-1", 1, pairs=3)
    staging = work.root / "manifests" / ".staging-0f3a-1b2c"
    staging.mkdir(parents=True)
    write_parquet_atomic(arrow_schema(ManifestRow).empty_table(), staging / "manifest.parquet")
    build_warehouse(work)
    shutil.rmtree(staging)  # published: renamed to its hash's folder
    con = duckdb.connect(str(work.warehouse), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM manifest").fetchall() == [(0,)]
    finally:
        con.close()
