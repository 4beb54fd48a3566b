"""The freeze-manifest and plan-orders flows in Prefect's embedded mode, and their CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tasks.errors import InputError
from tasks.ingest.manifest import read_manifest
from tasks.plan import plan_id_of, read_plan
from tasks.store.workdir import WorkDir

MAPPING = "pair_id=id,question=q,answer_a=first,answer_b=second,key=label"
ROWS = [
    {"id": "t1", "q": "2+2?", "first": "4", "second": "5 ", "label": "A"},
    {"id": "t2", "q": "Capital of France?", "first": "Lyon", "second": "Paris\r\n", "label": "B"},
    {"id": "t3", "q": "Same?", "first": "yes", "second": "yes", "label": None},
]


@pytest.fixture
def table_file(tmp_path: Path) -> Path:
    path = tmp_path / "toy.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), "utf-8")
    return path


@pytest.mark.slow
def test_freeze_and_plan_flows(prefect_harness: None, work: WorkDir, table_file: Path) -> None:
    from flows.stageflows import freeze_flow, plan_flow

    sources = [{"kind": "table", "path": str(table_file), "mapping": MAPPING}]
    manifest_hash = freeze_flow(sources, str(work.root))
    info, table = read_manifest(work, manifest_hash)
    assert info.pairs == 3 and info.sources == [str(table_file)]
    assert info.identical_answer_pairs == ["t3"]
    by_id = {r["pair_id"]: r for r in table.to_pylist()}
    assert by_id["t2"]["answer_b"] == "Paris\r\n" and by_id["t1"]["answer_b"] == "5 "

    plan_id = plan_flow(manifest_hash, k=2, design="balanced", rng_seed=7, work_dir=str(work.root))
    assert plan_id == plan_id_of(manifest_hash, 2, "balanced", 7)
    plan_info, plan = read_plan(work, plan_id)
    assert plan.num_rows == 6 and plan_info.rng_seed == 7

    drawn = plan_flow(manifest_hash, k=4, design="common", work_dir=str(work.root))
    drawn_info, _ = read_plan(work, drawn)
    assert drawn_info.rng_seed is not None  # drawn by the flow and recorded
    assert drawn == plan_id_of(manifest_hash, 4, "common", drawn_info.rng_seed)

    with pytest.raises(InputError, match="even integer"):
        plan_flow(manifest_hash, k=3, work_dir=str(work.root))


@pytest.mark.slow
def test_cli_freeze_then_plan(prefect_harness: None, work: WorkDir, table_file: Path) -> None:
    from flows.cli import app

    runner = CliRunner()
    base = ["--work-dir", str(work.root)]
    result = runner.invoke(app, [*base, "freeze", "--table", str(table_file), "--map", MAPPING])
    assert result.exit_code == 0, result.output
    manifest_hash = result.output.split()[1]
    assert (work.root / "manifests" / manifest_hash / "manifest.parquet").is_file()
    assert "(frozen)" in result.output
    assert "toy: 3 pairs (key A: 1, key B: 1, key none: 1)" in result.output
    assert "'t3' has byte-identical answers" in result.output

    again = runner.invoke(app, [*base, "freeze", "--table", str(table_file), "--map", MAPPING])
    assert again.exit_code == 0 and "(already frozen)" in again.output

    planned = runner.invoke(app, [*base, "plan", manifest_hash[:10], "--k", "2"])
    assert planned.exit_code == 0, planned.output
    plan_id = plan_id_of(manifest_hash, 2, "full", None)
    assert f"plan {plan_id}" in planned.output
    assert "12 presentations for 3 pairs" in planned.output
    assert str(work.plan_dir(plan_id)) in planned.output

    unknown = runner.invoke(app, [*base, "plan", "ffffffffff0"])
    assert isinstance(unknown.exception, InputError) and "no manifest" in str(unknown.exception)
    nothing = runner.invoke(app, [*base, "freeze"])
    assert isinstance(nothing.exception, InputError) and "nothing to freeze" in str(
        nothing.exception
    )
