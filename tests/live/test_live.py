"""Live paired unanimity: draws, decisions, and live runs equal to the replay of their draws."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import stage_demo_plan

from schemas import LiveDrawRow, LivePairRow, LiveSummaryRow, arrow_schema, rows_to_table
from schemas.judge import JudgeSpec
from simjudge.persona import PRESETS, Persona
from simjudge.server import SimJudgeServer
from tasks.errors import InputError, IntegrityError
from tasks.ingest.manifest import read_manifest
from tasks.live.draws import draw_live, draw_pair
from tasks.live.outcomes import first_couple_stops, live_pairs, replay_draws
from tasks.live.runs import find_reference_run
from tasks.plan import make_plan, write_plan
from tasks.replay.engine import replay
from tasks.store.workdir import WorkDir

K = 4
PAIRS = 60
JUDGES = 3
KEYS = ["judge", "config", "dataset", "pair_id"]


# --- draws -----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 4, 6])
def test_draws_are_a_balanced_reference_matched_into_ordered_couples(k: int) -> None:
    for pair_id in ("p1", "p2", "another pair"):
        rows = draw_pair(11, pair_id, k)
        assert sorted(r.seed for r in rows) == list(range(k))  # each seed used once
        assert Counter(r.order for r in rows) == {"AB": k // 2, "BA": k // 2}
        by_couple: dict[int, list[LiveDrawRow]] = {}
        for r in rows:
            by_couple.setdefault(r.couple, []).append(r)
        assert sorted(by_couple) == list(range(k // 2))
        for members in by_couple.values():
            assert sorted(m.order for m in members) == ["AB", "BA"]
            assert len({m.position for m in members}) == 1
        assert sorted({r.position for r in rows}) == list(range(k // 2))
        assert draw_pair(11, pair_id, k) == rows  # reproducible from the seed


def test_a_pairs_draws_do_not_depend_on_the_other_pairs() -> None:
    both = draw_live(["x", "y"], 4, 5).to_pylist()
    alone = draw_live(["y"], 4, 5).to_pylist()
    assert [r for r in both if r["pair_id"] == "y"] == alone
    assert draw_live(["x", "y"], 4, 5).schema == arrow_schema(LiveDrawRow)
    seeds_differ = any(draw_pair(s, "y", 4) != draw_pair(5, "y", 4) for s in range(6, 12))
    assert seeds_differ
    with pytest.raises(InputError, match="rng seed"):
        draw_pair(-1, "y", 4)
    with pytest.raises(InputError):
        draw_pair(1, "y", 3)


def test_draws_are_uniform_over_references_matchings_and_couple_orders() -> None:
    """K = 4: 6 balanced references x 2 matchings x 2 couple orders, all equally likely."""
    n = 4800
    seen = Counter()
    for seed in range(n):
        rows = draw_pair(seed, "pair", 4)
        seen[tuple((r.seed, r.order, r.position) for r in sorted(rows, key=lambda r: r.seed))] += 1
    assert len(seen) == 24
    expected = n / 24
    chi2 = sum((c - expected) ** 2 / expected for c in seen.values())
    assert chi2 < 60, chi2  # 23 degrees of freedom: p < 1e-4 beyond 60


# --- replay of draws over a full grid --------------------------------------------------------


def _grid(outcomes: dict[str, dict[tuple[int, str], str]], judge: str = "j") -> pd.DataFrame:
    rows = [
        {"judge": judge, "config": "c", "dataset": "d", "pair_id": p, "seed": s, "order": o,
         "outcome": out, "key": "A"}
        for p, cells in outcomes.items()
        for (s, o), out in cells.items()
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _draws(spec: dict[str, list[tuple[int, str, int, int]]]) -> pa.Table:
    rows = [
        {"pair_id": p, "seed": s, "order": o, "couple": c, "position": pos}
        for p, cells in spec.items()
        for s, o, c, pos in cells
    ]
    return rows_to_table(rows, LiveDrawRow)


def test_replay_of_hand_made_draws() -> None:
    def full(values: str) -> dict[tuple[int, str], str]:
        # values: the outcomes of 0AB 0BA 1AB 1BA 2AB 2BA 3AB 3BA
        cells = list(itertools.product(range(4), ("AB", "BA")))
        return dict(zip(cells, values, strict=True))

    # The reference is 0AB, 1BA (first couple), then 2BA, 3AB; the other cells are decoys
    # that would change the decision if they were counted.
    grid = _grid({"stop": full("ABBAXBBX"), "go": full("ABBMAXXB"), "tie": full("AAABAXTA")})
    draws = [(0, "AB", 0, 0), (1, "BA", 0, 0), (2, "BA", 1, 1), (3, "AB", 1, 1)]
    got = replay_draws(grid, _draws({"stop": draws, "go": draws, "tie": draws}))
    got = got.set_index("pair_id")
    # stop: A, A -> unanimous after 2 calls
    assert got.loc["stop", ["calls", "decision", "stopped_early"]].tolist() == [2, "A", True]
    # go: A, M -> all 4: A, M, X, X -> A (M counts as executed, never decisive)
    assert got.loc["go", ["calls", "decision", "stopped_early"]].tolist() == [4, "A", False]
    # tie: A, B (conflict) -> all 4: A, B, X, T -> N
    assert got.loc["tie", ["calls", "decision", "stopped_early"]].tolist() == [4, "N", False]
    # A later couple's unanimity does not stop: only the first couple can.
    late = replay_draws(_grid({"late": full("AXXBXAAX")}), _draws({"late": draws}))
    assert late[["calls", "decision", "stopped_early"]].values.tolist() == [[4, "A", False]]
    partial = grid[~((grid.pair_id == "go") & (grid.seed == 3) & (grid.order == "AB"))]
    with pytest.raises(InputError, match="pair go: has 3 of 4"):
        replay_draws(partial, _draws({"go": draws}))


def test_replayed_draws_average_to_the_replay_engines_expected_calls() -> None:
    """Over many rng seeds, the replay of recorded draws averages to the exact expectation."""
    import random

    rng = random.Random(3)
    pairs = {
        f"p{i}": {(s, o): rng.choice("AAABBTIM") for s in range(4) for o in ("AB", "BA")}
        for i in range(12)
    }
    grid = _grid(pairs)
    exact = replay(grid, designs=["balanced"], policies=["paired_unanimity"]).replay.to_pandas()
    exact = exact.set_index("pair_id")["expected_calls"]
    reps = 400
    copies, draws = [], []
    for r in range(reps):
        copies.append(grid.assign(pair_id=grid["pair_id"] + f"#{r}"))
        draws.extend(
            {**row.model_dump(), "pair_id": f"{p}#{r}"} for p in pairs for row in draw_pair(r, p, 4)
        )
    got = replay_draws(pd.concat(copies), rows_to_table(draws, LiveDrawRow))
    mean = got.assign(pair=got["pair_id"].str.split("#").str[0]).groupby("pair")["calls"].mean()
    assert abs(mean.mean() - exact.mean()) < 0.05
    for pair_id, value in mean.items():
        assert abs(value - exact[pair_id]) < 0.3, pair_id


def test_live_decisions_need_the_policys_calls() -> None:
    cols = ["judge", "config", "dataset", "pair_id", "seed", "order", "outcome", "key"]
    draws = _draws({"p": [(0, "AB", 0, 0), (1, "BA", 0, 0), (2, "BA", 1, 1), (3, "AB", 1, 1)]})
    wave1 = pa.Table.from_pylist(
        [dict(zip(cols, ["j", "c", "d", "p", 0, "AB", "B", "A"], strict=True)),
         dict(zip(cols, ["j", "c", "d", "p", 1, "BA", "B", "A"], strict=True))]
    )  # fmt: skip
    stops = first_couple_stops(wave1, draws)
    assert stops == {("j", "c", "p"): "B"}
    pairs = live_pairs(wave1, stops, 4)
    assert pairs.schema == arrow_schema(LivePairRow)
    assert pairs.to_pylist()[0] | {} == {
        "judge": "j", "config": "c", "dataset": "d", "pair_id": "p", "realised_calls": 2,
        "stopped_early": True, "decision": "B", "key": "A",
    }  # fmt: skip
    with pytest.raises(IntegrityError, match="executed 2 calls, the policy executes 4"):
        live_pairs(wave1, {("j", "c", "p"): None}, 4)
    with pytest.raises(IntegrityError, match="first couple has 1"):
        first_couple_stops(wave1.slice(0, 1), draws)
    stray = wave1.set_column(4, "seed", pa.array([2, 1], type=pa.int64()))
    with pytest.raises(IntegrityError, match="not a drawn call"):
        first_couple_stops(stray, draws)


# --- live runs against the simulated judge ---------------------------------------------------

ALWAYS_LEFT = Persona(name="always-left", skill=0.9, left_bias=1.0)
PERSONAS = [*PRESETS, ALWAYS_LEFT]


@dataclass
class Runs:
    work: WorkDir
    plan_id: str
    judges: list[JudgeSpec]
    live: dict[str, Any]
    live_sent: list[str]
    full_sent: list[str]
    full_grid: pd.DataFrame


def _judges(base_url: str) -> list[JudgeSpec]:
    return [
        JudgeSpec(
            name=p, base_url=base_url, simulated=True, model=p, max_concurrency=32, max_retries=0
        )
        for p in ("strong", "noisy", "always-left")
    ]


def _live(work: WorkDir, run_id: str, plan_id: str, judges: list[JudgeSpec], seed: int) -> Any:
    from flows.live import live_flow

    return asyncio.run(
        live_flow(run_id, plan_id, judges, seed, batch_size=200, work_dir=str(work.root))
    )


@pytest.fixture(scope="module")
def runs(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """A live run over 60 demo pairs (K = 4, three judges), then the full grid on the same
    cache, remapped and replayed like a full-grid run."""
    from flows.stageflows import judge_flow
    from tasks.remap.outcomes import remap_run
    from tasks.replay.engine import write_replay

    work = WorkDir(tmp_path_factory.mktemp("live") / "work")
    staged = stage_demo_plan(work, pairs=PAIRS, k=K)
    with SimJudgeServer(PERSONAS, manifest=staged.manifest) as server:
        judges = _judges(server.base_url)
        live = _live(work, "live-1", staged.plan_id, judges, 2024)
        live_sent = [e["call_key"] for e in server.request_log()]
        server.clear_log()
        asyncio.run(judge_flow("full-1", staged.plan_id, judges, work_dir=str(work.root)))
        full_sent = [e["call_key"] for e in server.request_log()]
    full_grid = remap_run(work, "full-1").outcomes.to_pandas()
    write_replay(replay(full_grid), work.run_dir("full-1"))
    return Runs(work, staged.plan_id, judges, live, live_sent, full_sent, full_grid)


def _table(runs: Runs, run_id: str, name: str) -> pd.DataFrame:
    return pq.read_table(runs.work.run_dir(run_id) / name).to_pandas()


@pytest.mark.slow
def test_live_run_equals_the_replay_of_its_draws_over_the_full_grid(runs: Runs) -> None:
    live = _table(runs, "live-1", "live.parquet")
    draws = pq.read_table(runs.work.run_dir("live-1") / "live_draws.parquet")
    assert len(runs.full_grid) == PAIRS * 2 * K * JUDGES and set(runs.full_grid["outcome"]) >= {
        "A",
        "B",
    }
    replayed = replay_draws(runs.full_grid, draws)
    assert len(live) == len(replayed) == PAIRS * JUDGES
    both = live.merge(replayed, on=KEYS, how="outer", validate="one_to_one", indicator=True)
    assert (both["_merge"] == "both").all()
    assert (both["realised_calls"] == both["calls"]).all()
    assert (both["decision_x"] == both["decision_y"]).all()
    assert (both["stopped_early_x"] == both["stopped_early_y"]).all()
    # Not trivially equal: some pairs stop, some go on, and decisions vary.
    assert set(live["realised_calls"]) == {2, K}
    assert set(live["decision"]) == {"A", "B", "N"}


@pytest.mark.slow
def test_live_run_sent_exactly_the_calls_it_reports(runs: Runs) -> None:
    live = _table(runs, "live-1", "live.parquet")
    outcomes = _table(runs, "live-1", "outcomes.parquet")
    calls = _table(runs, "live-1", "calls.parquet")
    realised = int(live["realised_calls"].sum())
    assert len(outcomes) == len(calls) == realised == runs.live["live"]["realised_calls"]
    assert (calls["status"] != "pending").all()
    # Two demo pairs have the same text, so a few executed calls share a call key: each
    # distinct key is sent once (max_retries = 0: one request per call).
    distinct = set(outcomes["call_key"])
    assert realised - 20 < len(distinct) <= realised
    assert len(runs.live_sent) == len(set(runs.live_sent)) == len(distinct)
    assert set(runs.live_sent) == distinct == set(calls["call_key"])
    assert runs.live["calls"]["sent"] == len(distinct)
    # The full grid reuses every live call from the cache and sends only the rest.
    assert not set(runs.full_sent) & distinct
    assert set(runs.full_sent) | distinct == set(runs.full_grid["call_key"])
    per_pair = outcomes.groupby(KEYS).size().rename("rows").reset_index()
    merged = per_pair.merge(live, on=KEYS)
    assert (merged["rows"] == merged["realised_calls"]).all()


@pytest.mark.slow
def test_mean_realised_calls_is_close_to_the_replays_expected_calls(runs: Runs) -> None:
    live = _table(runs, "live-1", "live.parquet")
    exact = replay(runs.full_grid, designs=["balanced"], policies=["paired_unanimity"]).replay
    expected = exact.to_pandas().groupby("judge")["expected_calls"].mean()
    realised = live.groupby("judge")["realised_calls"].mean()
    assert realised["strong"] < K - 1 and realised["noisy"] < K  # it does save calls
    for judge in ("strong", "noisy", "always-left"):
        # An expectation over draws against one draw per pair: 60 pairs, loosely.
        assert abs(realised[judge] - expected[judge]) < 0.4, (judge, realised, expected)


@pytest.mark.slow
def test_a_judge_that_always_picks_left_never_stops_early(runs: Runs) -> None:
    live = _table(runs, "live-1", "live.parquet")
    left = live[live["judge"] == "always-left"]
    assert len(left) == PAIRS
    assert not left["stopped_early"].any() and (left["realised_calls"] == K).all()
    # Half its reference says A, half B: every decision is neutral.
    assert set(left["decision"]) == {"N"}
    summary = _table(runs, "live-1", "live_summary.parquet").set_index("judge")
    assert summary.loc["always-left", "realised_savings"] == 0.0
    assert summary.loc["strong", "realised_savings"] > 0.3


@pytest.mark.slow
def test_live_tables_and_run_info(runs: Runs) -> None:
    summary = pq.read_table(runs.work.run_dir("live-1") / "live_summary.parquet")
    assert summary.schema == arrow_schema(LiveSummaryRow)
    live = _table(runs, "live-1", "live.parquet")
    for row in summary.to_pylist():
        group = live[live["judge"] == row["judge"]]
        assert row["pairs"] == PAIRS and row["planned_calls"] == K * PAIRS
        assert row["realised_calls"] == group["realised_calls"].sum()
        assert row["stopped_early"] == group["stopped_early"].sum()
        assert row["realised_savings"] == pytest.approx(1 - row["realised_calls"] / (K * PAIRS))
        assert (row["design"], row["policy"]) == ("balanced", "paired_unanimity")
    info = json.loads((runs.work.run_dir("live-1") / "run.json").read_text("utf-8"))
    assert info["live"]["rng_seed"] == 2024 and info["live"]["realised_calls"] > 0
    assert len(info["live"]["calls"]["waves"]) == 2
    # The live run's dispositions: no (pair, seed) is judged in both orders.
    assert len(_table(runs, "live-1", "dispositions.parquet")) == 0
    assert find_reference_run(runs.work, "live-1") == "full-1"


@pytest.mark.slow
def test_live_needs_a_full_grid_plan(runs: Runs) -> None:
    _, manifest = read_manifest(runs.work, read_plan_manifest(runs))
    info, table = make_plan(manifest, K, "balanced", 3)
    write_plan(runs.work, info, table)
    with pytest.raises(InputError, match="needs a full-grid plan") as refused:
        _live(runs.work, "live-3", info.plan_id, runs.judges, 1)
    # The hint is a command that runs: the design is the --design option.
    hint = f"`judgeline plan {info.manifest_hash[:16]} --design full --k {K}`"
    assert hint in str(refused.value)


def read_plan_manifest(runs: Runs) -> str:
    from tasks.plan import read_plan

    info, _ = read_plan(runs.work, runs.plan_id)
    return info.manifest_hash


@pytest.mark.slow
def test_failed_calls_count_as_executed_and_never_decide(runs: Runs) -> None:
    faulty = [p.model_copy(update={"name": "strong"}) for p in PRESETS if p.name == "strong"]
    with SimJudgeServer(faulty) as server:
        server.set_faults(rate_5xx=0.3)
        # Another temperature: new call keys, so nothing comes from the cache.
        judge = JudgeSpec(name="flaky", base_url=server.base_url, simulated=True, model="strong",
                          temperature=0.5, max_retries=0, max_concurrency=32)  # fmt: skip
        _live(runs.work, "live-faults", runs.plan_id, [judge], 99)
        sent = len(server.request_log())
    outcomes = _table(runs, "live-faults", "outcomes.parquet")
    live = _table(runs, "live-faults", "live.parquet").set_index("pair_id")
    draws = _table(runs, "live-faults", "live_draws.parquet")
    missing = outcomes[outcomes["outcome"] == "M"]
    assert len(missing) > 10 and set(missing["error_category"]) == {"server_error"}
    assert sent == len(set(outcomes["call_key"])) and len(outcomes) == live["realised_calls"].sum()
    first = outcomes.merge(draws[draws["position"] == 0], on=["pair_id", "seed", "order"])
    for pair_id in set(first.loc[first["outcome"] == "M", "pair_id"]):
        assert not live.loc[pair_id, "stopped_early"] and live.loc[pair_id, "realised_calls"] == K
    assert (outcomes.groupby("pair_id").size() == live["realised_calls"]).all()

    # No full-grid run used this judge: the report shows realised savings, expected empty.
    from tasks.report.data import build_report, load_report_data

    _write_record(runs, "live-faults")
    alone = load_report_data(runs.work, "live-faults")
    assert alone.header["replay from"].startswith("none")
    assert alone.summary.empty and alone.realised is not None and len(alone.realised) == 1
    assert 'id="realised"' in build_report(runs.work, "live-faults").read_text("utf-8")


def _write_record(runs: Runs, run_id: str) -> None:
    """The run record a nightly run would have written (the report's header reads it)."""
    import datetime as dt

    from schemas.run import RunRecord
    from tasks.runs.record import code_version, write_record

    write_record(
        runs.work,
        RunRecord(
            run_id=run_id, name="live-test", status="completed", config_hash="0" * 64,
            config={"k": K, "judges": []}, code=code_version(),
            started_at=dt.datetime.now(dt.UTC), live=runs.live["live"],
        ),
    )  # fmt: skip


@pytest.mark.slow
def test_live_report_shows_realised_next_to_expected_savings(runs: Runs) -> None:
    from tasks.report.charts import signed_pct
    from tasks.report.data import build_report, load_report_data

    _write_record(runs, "live-1")
    data = load_report_data(runs.work, "live-1")
    assert data.header["replay from"] == "run full-1 (full grid)"
    assert data.realised is not None and len(data.realised) == JUDGES
    expected = pq.read_table(runs.work.run_dir("full-1") / "summary.parquet").to_pandas()
    assert len(data.summary) == len(expected) > 0
    assert int(data.disclosure["planned"].sum()) == runs.live["live"]["realised_calls"]
    html = build_report(runs.work, "live-1").read_text("utf-8")
    section = html[html.index('<section id="realised"') :]
    section = section[: section.index("</section>")]
    pu = expected[(expected.design == "balanced") & (expected.policy == "paired_unanimity")]
    for row in data.realised.to_dict("records"):
        savings = pu.loc[pu.judge == row["judge"], "savings"].item()
        assert f">{100 * savings:.1f}%<" in section  # expected, from the full-grid replay
        assert f">{100 * row['realised_savings']:.1f}%<" in section
        assert f">{signed_pct(row['realised_savings'] - savings)}<" in section


@pytest.mark.slow
def test_nightly_runs_live_when_configured(prefect_harness: None, tmp_path: Any) -> None:
    from flows.nightly import nightly_flow, rerun_run_flow
    from schemas.config import DatasetSpec, LiveSpec, RunConfig

    work = WorkDir(tmp_path / "work")
    with SimJudgeServer() as server:
        judge = JudgeSpec(name="strong", base_url=server.base_url, simulated=True, model="strong")
        config = RunConfig(
            name="live-night", datasets=[DatasetSpec(kind="demo")], judges=[judge], k=K,
            live=LiveSpec(rng_seed=4),
        )  # fmt: skip
        record = asyncio.run(
            nightly_flow(
                config=config.model_dump(mode="json"), work_dir=str(work.root), run_id="night-live"
            )  # fmt: skip
        )
        sent = len(server.request_log())
    assert record["status"] == "completed" and "live" in record["stage_seconds"]
    live = record["live"]
    # K = 2 would make paired unanimity the full reference: K = 4 can stop after 2 calls.
    assert live["planned_calls"] == 150 * K and 150 * 2 < live["realised_calls"] < 150 * K
    assert live["realised_savings"] == pytest.approx(1 - live["realised_calls"] / (150 * K))
    assert sum(record["outcomes"].values()) == live["realised_calls"] == record["calls"]["planned"]
    assert sent == record["calls"]["sent"] > 0
    assert record["config"]["live"] == {"policy": "paired_unanimity", "rng_seed": 4}
    folder = work.run_dir("night-live")
    assert (folder / "live.parquet").is_file() and not (folder / "replay.parquet").exists()
    html = Path(record["report"]).read_text("utf-8")
    assert 'id="realised"' in html and "no full-grid run of this plan" in html
    with pytest.raises(InputError, match="ran paired unanimity live"):
        asyncio.run(rerun_run_flow("night-live", str(work.root)))


@pytest.mark.slow
def test_cli_live_reproduces_a_run_and_shows_expected_savings(runs: Runs, tmp_path: Any) -> None:
    import yaml
    from typer.testing import CliRunner

    from flows.cli import app

    judges = tmp_path / "judges.yaml"
    specs = [j.model_dump(mode="json") for j in runs.judges]
    judges.write_text(yaml.safe_dump({"judges": specs}), "utf-8")
    root = str(runs.work.root)
    args = ["--work-dir", root, "live", runs.plan_id[:12], "--judges", str(judges)]
    args += ["--rng-seed", "2024", "--run-id", "live-cli", "--no-progress"]
    # Every call of these draws is cached: the judges' server is gone and nothing is sent.
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "expected savings: replay of run full-1" in result.output
    assert "sent 0 calls" in result.output
    # Same seed, same draws, same decisions (a call sent to the dead server would be an M).
    for name in ("live.parquet", "live_draws.parquet", "live_summary.parquet"):
        assert pq.read_table(runs.work.run_dir("live-1") / name).equals(
            pq.read_table(runs.work.run_dir("live-cli") / name)
        ), name
    summary = _table(runs, "live-1", "live_summary.parquet").set_index("judge")
    strong = summary.loc["strong"]
    assert f"{strong.realised_calls} of {strong.planned_calls}" in result.output
    record = (runs.work.run_dir("live-cli") / "record.json").read_bytes()
    bad = CliRunner().invoke(app, [*args, "--rng-seed", "5"])  # the later option wins
    assert isinstance(bad.exception, IntegrityError), bad.output
    assert "another configuration (it differs in live" in str(bad.exception)
    assert (runs.work.run_dir("live-cli") / "record.json").read_bytes() == record


@pytest.mark.slow
def test_remapping_a_live_run_keeps_its_executed_calls_only(runs: Runs) -> None:
    from flows.stageflows import remap_flow

    path = runs.work.run_dir("live-1") / "outcomes.parquet"
    before = pq.read_table(path)
    counts = remap_flow("live-1", str(runs.work.root))
    assert pq.read_table(path).equals(before)
    assert counts["planned"] == before.num_rows == runs.live["live"]["realised_calls"]
