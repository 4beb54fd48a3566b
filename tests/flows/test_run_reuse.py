"""Reusing a run id: an existing run is never touched by a job that is refused or that names
another configuration, plan or dataset; the same configuration runs again under its id (it
resumes, resends failed calls, or rebuilds a completed run from the cache: nothing is sent
twice); an import never takes an id that holds a run."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from schemas.config import RunConfig
from schemas.run import CodeVersion, RunInfo, RunRecord
from tasks.errors import InputError, IntegrityError
from tasks.runs.folder import RunFolder
from tasks.runs.jobs import new_record, recorded_run
from tasks.runs.preflight import check_run
from tasks.store.workdir import WorkDir


def config(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "mine",
        "datasets": [{"kind": "demo"}],
        "judges": [{"name": "j", "base_url": "http://127.0.0.1:9/v1", "model": "m"}],
        "k": 4,
    }
    raw.update(changes)
    return RunConfig.model_validate(raw).model_dump(mode="json")


def completed(run_id: str, cfg: dict[str, Any]) -> RunRecord:
    record = new_record(run_id, "mine", cfg)
    record.status, record.plan_id, record.manifest_hash = "completed", "plan-k4", "m1"
    record.code = CodeVersion(commit=None, dirty=None, packages={})
    record.started_at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return record


def snapshot(folder: RunFolder) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder.path)): p.read_bytes()
        for p in sorted(folder.path.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def test_a_job_of_another_configuration_leaves_the_run_alone(work: WorkDir) -> None:
    """The reported defect: `run k2.yaml --run-id A` over a completed K = 4 run A rewrote
    A's record.json before it was refused."""
    folder = RunFolder(work, "A")
    folder.write_record(completed("A", config()))
    before = snapshot(folder)
    other = new_record("A", "mine", config(k=2))
    with (
        pytest.raises(IntegrityError, match=r"run A .*another configuration.*\bk\b"),
        recorded_run(work, other),
    ):
        raise AssertionError("the job must not start")
    assert snapshot(folder) == before
    # Checked before Prefect starts too, naming what differs.
    with pytest.raises(IntegrityError, match=r"\bk\b.*--run-id"):
        check_run(RunConfig.model_validate(config(k=2)), work, "A")
    assert snapshot(folder) == before


def test_a_job_of_another_plan_or_manifest_leaves_the_run_alone(work: WorkDir) -> None:
    """Same configuration, but the dataset file changed (another manifest) or the run
    folder holds only a run.json (a `judge` run) of another plan."""
    folder = RunFolder(work, "A")
    folder.write_record(completed("A", config()))
    before = snapshot(folder)
    mine = new_record("A", "mine", config())
    mine.plan_id, mine.manifest_hash = "plan-k4-other", "m2"
    with (
        pytest.raises(IntegrityError, match="differs from this job in manifest_hash, plan_id"),
        recorded_run(work, mine),
    ):
        raise AssertionError("the job must not start")
    assert snapshot(folder) == before

    judged = RunFolder(work, "J")
    judges = config()["judges"]
    judged.write_info(
        RunInfo(run_id="J", plan_id="p1", manifest_hash="m1", template_id="arena-hard-v1",
                template_hash="h", judges=judges)
    )  # fmt: skip
    before = snapshot(judged)
    record = new_record("J", "mine", config())
    record.plan_id, record.manifest_hash = "p2", "m1"
    with (
        pytest.raises(IntegrityError, match=r"in plan_id \(.*run\.json"),
        recorded_run(work, record),
    ):
        raise AssertionError("the job must not start")
    assert snapshot(judged) == before and not judged.record.exists()


def test_the_same_configuration_runs_again_under_its_id(work: WorkDir) -> None:
    folder = RunFolder(work, "A")
    folder.write_record(completed("A", config()))
    again = new_record("A", "mine", config())
    again.plan_id, again.manifest_hash = "plan-k4", "m1"
    check_run(RunConfig.model_validate(config()), work, "A")
    with recorded_run(work, again):
        assert folder.read_record().status == "running"
    assert folder.read_record().status == "completed"


def test_a_damaged_record_is_never_replaced(work: WorkDir) -> None:
    folder = RunFolder(work, "A").create()
    folder.record.write_text('{"run_id": ', "utf-8")
    with (
        pytest.raises(IntegrityError, match="damaged"),
        recorded_run(work, new_record("A", "mine", config())),
    ):
        raise AssertionError("the job must not start")
    assert folder.record.read_text("utf-8") == '{"run_id": '


def test_import_refuses_an_id_that_holds_a_run(work: WorkDir, tmp_path: Path) -> None:
    """`import ... --run-id EXISTING` silently replaced a completed run."""
    from flows.cli import app
    from tests.imports.test_judgebench import _file

    folder = RunFolder(work, "A")
    folder.write_record(completed("A", config()))
    before = snapshot(folder)
    result = CliRunner().invoke(
        app, ["--work-dir", str(work.root), "import", "judgebench", str(_file(tmp_path)),
              "--run-id", "A"],
    )  # fmt: skip
    assert isinstance(result.exception, IntegrityError), result.output
    assert "run A already holds a run" in str(result.exception)
    assert snapshot(folder) == before
    assert not (work.root / "manifests").exists()  # refused before anything was frozen


CSV = "prompt,left,right,label\n" + "".join(
    f"Question {i}: what is {i}+{i}?,It is {2 * i}.,It is {2 * i + 1}.,A\n" for i in range(4)
)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_run_ids_reused_through_the_nightly_flow(work: WorkDir, tmp_path: Path) -> None:
    """End to end: a K = 2 configuration, then a changed dataset file, then an empty one
    under a completed K = 4 run's id are refused with every file of the run unchanged (the
    empty dataset also used to leave a `failed` record); the K = 4 configuration again
    completes from the cache, sending nothing."""
    from flows.nightly import nightly_flow
    from simjudge.server import SimJudgeServer
    from tasks.runs.jobs import scan_records

    data = tmp_path / "pairs.csv"
    data.write_text(CSV, "utf-8")
    dataset = {
        "kind": "table",
        "path": str(data),
        "mapping": "question=prompt,answer_a=left,answer_b=right,key=label",
    }
    with SimJudgeServer() as server:
        judges = [{"name": "j", "base_url": server.base_url, "model": "strong", "simulated": True}]

        def run(run_id: str | None = "A", **changes: Any) -> dict[str, Any]:
            cfg = config(datasets=[dataset], judges=judges, **changes)
            flow = nightly_flow(config=cfg, work_dir=str(work.root), run_id=run_id)
            result: dict[str, Any] = asyncio.run(flow)
            return result

        first = run()
        assert first["status"] == "completed"
        folder = RunFolder(work, "A")
        before = snapshot(folder)
        sent = len(server.request_log())
        with pytest.raises(IntegrityError, match="another configuration"):
            run(k=2)
        assert snapshot(folder) == before
        data.write_text(CSV.replace("Question 0", "Question zero"), "utf-8")
        with pytest.raises(IntegrityError, match="manifest_hash"):
            run()
        assert snapshot(folder) == before
        data.write_text(CSV.splitlines()[0] + "\n", "utf-8")  # an empty dataset
        with pytest.raises(InputError, match="no pairs to freeze"):
            run(None)
        assert snapshot(folder) == before
        data.write_text(CSV, "utf-8")
        again = run()
        # Rebuilt from the cache: nothing sent now, and what the run paid is kept (it was
        # recorded as `sent 0`, all reused, so `diff` and the trends lost its cost).
        assert again["status"] == "completed" and again["calls"]["sent_now"] == 0
        assert again["calls"]["sent"] == first["calls"]["sent"] > 0
        assert again["calls"]["cached"] == 0
        from tasks.history.diff import diff_runs
        from tasks.history.trends import trend_points

        assert diff_runs(work, "A", "A").calls_b["sent"] == first["calls"]["sent"]
        paid = [p for p in trend_points(work) if p.run_id == "A"]
        assert sum(p.sent_calls for p in paid) == first["calls"]["sent"]
        assert len(server.request_log()) == sent
    assert RunFolder(work, "A").read_record().config["k"] == 4
    assert [(e.run_id, e.status) for e in scan_records(work)] == [("A", "completed")]
