"""A live run following advice: accepted for paired_unanimity or paired_strict, else refused."""

from __future__ import annotations

import html as html_module
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError
from support import persona_grids

from schemas.advice import AdviceRow
from schemas.arrow import arrow_schema
from schemas.config import LiveSpec
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from tasks.errors import InputError
from tasks.live.advice import advised_savings, follow_advice
from tasks.runs.folder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.store.workdir import WorkDir


def _advice(policies: dict[str, str], certificate: str = "certified") -> pa.Table:
    rows = [
        {
            "judge": "j",
            "config": config,
            "policy": policy,
            "rank": "advised",
            "max_change": 0.01,
            "level": 0.95,
            "pairs": 400,
            "savings": 0.25,
            "change": 0.002,
            "reversal": 0.0,
            "change_range": 0.5,
            "change_bound": 0.008 if certificate == "certified" else 0.013,
            "certificate": certificate,
            "note": "n",
        }
        for config, policy in policies.items()
    ]
    return pa.Table.from_pylist(rows, schema=arrow_schema(AdviceRow))


def _judges() -> list[JudgeSpec]:
    return [
        JudgeSpec.model_validate(
            {
                "name": "j",
                "base_url": "http://127.0.0.1:1/v1",
                "model": "m",
                "configs": [{"name": "low"}, {"name": "high"}],
            }
        )
    ]


def test_live_spec_names_the_advising_run_and_the_budget() -> None:
    spec = LiveSpec(policy="advised", advised_by="r1", max_change="1%", rng_seed=0)
    assert (spec.advised_by, spec.max_change, spec.level) == ("r1", 0.01, None)
    assert LiveSpec.model_validate(spec.model_dump()) == spec
    with pytest.raises(ValidationError, match="advised_by"):
        LiveSpec(policy="advised", max_change=0.01, rng_seed=0)
    with pytest.raises(ValidationError, match="advised_by"):
        LiveSpec(advised_by="r1", rng_seed=0)
    with pytest.raises(ValidationError, match="needs max_change"):
        LiveSpec(policy="advised", advised_by="r1", rng_seed=0)
    with pytest.raises(ValidationError, match="only apply to policy: advised"):
        LiveSpec(max_change=0.01, rng_seed=0)
    # A configuration without advice keeps its dump, and so its hash.
    assert LiveSpec(rng_seed=3).model_dump() == {"policy": "paired_unanimity", "rng_seed": 3}


def test_advice_is_followed_only_where_the_live_engine_reproduces_it() -> None:
    table = _advice({"low": "paired_unanimity", "high": "paired_strict"})
    assert advised_savings(table, "r1", _judges()) == {("j", "low"): 0.25, ("j", "high"): 0.25}
    table = _advice({"low": "paired_unanimity", "high": "paired_nonstrict"})
    with pytest.raises(InputError, match="advises paired_nonstrict for judge 'j' config 'high'"):
        advised_savings(table, "r1", _judges())
    with pytest.raises(InputError, match="no advice for judge 'j' config 'high'"):
        advised_savings(_advice({"low": "paired_unanimity"}), "r1", _judges())


def test_advice_without_a_certificate_is_refused() -> None:
    """docs/design.md#advice: only certified advice is followed, whatever the policy."""
    table = _advice({"low": "paired_strict", "high": "paired_strict"}, certificate="over")
    with pytest.raises(InputError, match=r"without a certificate \(over: bound 1.30% against"):
        advised_savings(table, "r1", _judges())


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    return {
        str(p.relative_to(root)): (p.lstat().st_mode, p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
    }


def test_the_advice_a_live_run_follows_is_its_configurations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A what-if `advise` at another budget changes nothing: the live run draws its advice
    from the advising run's outcomes at its own configuration's budget, and keeps it."""
    from tests.flows.test_hostile_input import run_main

    work = WorkDir.at(tmp_path / "work")
    sure = Persona(name="sure", skill=1.0)  # 104 unanimous pairs certify within 1% at K = 4
    write_parquet_atomic(
        persona_grids([(sure, None)], pairs=104, k=4, seed=1), RunFolder(work, "r1").outcomes
    )
    judges = [JudgeSpec(name="sure", base_url="http://127.0.0.1:1/v1", model="m")]
    live = LiveSpec(policy="advised", advised_by="r1", max_change=0.01, rng_seed=0)
    with pytest.raises(InputError, match="advised_by.*run 'nope' has no outcomes"):
        follow_advice(work, "live-1", live.model_copy(update={"advised_by": "nope"}), judges)
    before = _snapshot(tmp_path)
    for budget in ("20%", "0.001"):
        what_if = run_main(monkeypatch, "--work-dir", str(work.root), "advise", "r1",
                           "--max-change", budget)  # fmt: skip
        assert what_if.code == 0, what_if.err
        assert "Nothing is written" in " ".join(what_if.out.split())
        assert _snapshot(tmp_path) == before
    assert follow_advice(work, "live-1", live, judges) == {("sure", "default"): 0.5}
    kept = pq.read_table(RunFolder(work, "live-1").table("advice")).to_pylist()
    advised = next(r for r in kept if r["rank"] == "advised")
    assert advised["max_change"] == 0.01 and advised["certificate"] == "certified"
    # A budget too small to certify any decision-changing policy is refused before a run
    # starts: nothing is written, no record lists it.
    from schemas.config import RunConfig
    from tasks.runs.preflight import check_run

    strict = live.model_copy(update={"max_change": 0.001})
    config = RunConfig(name="n", datasets=[{"kind": "demo"}], judges=judges, k=4, live=strict)
    before = _snapshot(tmp_path)
    with pytest.raises(InputError, match="live policy advised: run 'r1' advises strict"):
        check_run(config, work, "live-2")
    assert _snapshot(tmp_path) == before


@pytest.mark.slow
def test_a_nightly_live_run_follows_the_advice_its_configuration_asks_for(
    prefect_harness: None, tmp_path: Path
) -> None:
    import asyncio

    from flows.nightly import nightly_flow
    from schemas.config import DatasetSpec, RunConfig
    from simjudge.server import SimJudgeServer

    work = WorkDir(tmp_path / "work")
    sure = Persona(name="strong", skill=1.0)  # the advising run: 104 unanimous pairs
    write_parquet_atomic(
        persona_grids([(sure, None)], pairs=104, k=4, seed=1), RunFolder(work, "r1").outcomes
    )
    with SimJudgeServer() as server:
        judge = JudgeSpec(name="strong", base_url=server.base_url, simulated=True, model="strong")
        config = RunConfig(
            name="advised-night", datasets=[DatasetSpec(kind="demo")], judges=[judge], k=4,
            live=LiveSpec(policy="advised", advised_by="r1", max_change="1%", rng_seed=4),
        )  # fmt: skip
        record = asyncio.run(
            nightly_flow(
                config=config.model_dump(mode="json"),
                work_dir=str(work.root),
                run_id="night-advised",
            )  # fmt: skip
        )
    assert record["status"] == "completed"
    assert record["config"]["live"]["max_change"] == 0.01
    kept = pq.read_table(RunFolder(work, "night-advised").table("advice")).to_pylist()
    advised = next(r for r in kept if r["rank"] == "advised")
    assert advised["policy"] in ("paired_unanimity", "paired_strict")
    html = html_module.unescape(Path(record["report"]).read_text("utf-8"))
    assert "run r1's, within 1% changed decisions at 95% (Advice below)" in html
    assert 'id="advice"' in html


def test_advise_on_a_live_run_says_it_needs_a_full_grid_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`advise LIVE-RUN` drew advice from the live run's executed calls (283 pairs of a
    partial grid) as if they were a full grid."""
    from tests.flows.test_hostile_input import run_main

    work = WorkDir.at(tmp_path / "work")
    grid = persona_grids([(Persona(name="sure", skill=1.0), None)], pairs=30, k=4, seed=1)
    folder = RunFolder(work, "live-1")
    write_parquet_atomic(grid.slice(0, grid.num_rows // 2), folder.outcomes)
    write_parquet_atomic(pa.table({"judge": ["sure"]}), folder.live_summary)
    before = _snapshot(tmp_path)
    refused = run_main(monkeypatch, "--work-dir", str(work.root), "advise", "live-1")
    refused.assert_one_paragraph(
        "run 'live-1' ran a stopping policy live", "advise a full-grid run"
    )
    assert refused.out == "" and _snapshot(tmp_path) == before
