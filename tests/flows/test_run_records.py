"""Run records from the command line: a refused process leaves another's run alone, every
job that judges writes one, and `runs` tells damaged and interrupted runs apart."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support import REPO, bare_record

from schemas.run import RunRecord
from tasks.judging.claims import RunLock
from tasks.runs.record import write_record
from tasks.store.workdir import WorkDir

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
CONFIG = """name: mine
datasets: [{kind: demo}]
judges: [{name: j, base_url: 'http://127.0.0.1:9/v1', model: m}]
k: 2
"""


def judgeline(
    work: WorkDir, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "COLUMNS")}
    env.pop("JUDGELINE_WORK_DIR", None)
    return subprocess.run(
        [JUDGELINE, "--work-dir", str(work.root), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def running_record(run_id: str) -> RunRecord:
    return bare_record(run_id, name="mine", status="running")


@pytest.mark.slow
def test_a_refused_run_leaves_the_running_record_alone(work: WorkDir, tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text(CONFIG, "utf-8")
    record = write_record(work, running_record("X"))
    before = record.read_bytes()
    with RunLock(work, "X"):  # another process is running X
        result = judgeline(work, "run", str(config), "--run-id", "X")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "being judged by another process" in result.stderr
    assert record.read_bytes() == before


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_rerun_failed_from_the_command_line_rebuilds_the_run(work: WorkDir) -> None:
    """A night whose judge was down, then `rerun-failed` once it is up: the record, the
    outcomes, the replay and the report are all of the completed calls."""
    import asyncio
    import socket

    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from flows.cli import app
    from flows.nightly import nightly_flow
    from schemas.config import DatasetSpec, RunConfig
    from schemas.judge import JudgeSpec
    from simjudge.server import SimJudgeServer
    from tasks.runs.folder import RunFolder
    from tasks.runs.record import read_record

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    judge = JudgeSpec(
        name="strong", base_url=f"http://127.0.0.1:{port}/v1", simulated=True, model="strong",
        max_retries=0,
    )  # fmt: skip
    config = RunConfig(name="n", datasets=[DatasetSpec(kind="demo")], judges=[judge], k=2)
    from tasks.runs.health import RunNotCompleted

    # Every call fails: the run writes everything, then ends failed.
    with pytest.raises(RunNotCompleted):
        asyncio.run(
            nightly_flow(config=config.model_dump(mode="json"), work_dir=str(work.root), run_id="N")
        )
    down = read_record(work, "N")
    assert down.status == "failed"
    assert down.calls["stored"] == 0 and down.outcomes["M"] == down.calls["planned"]
    folder = RunFolder(work, "N")
    stale_summary = folder.summary.stat().st_mtime_ns

    with SimJudgeServer(port=port):
        result = CliRunner().invoke(
            app, ["--work-dir", str(work.root), "rerun-failed", "N", "--no-progress"]
        )
    assert result.exit_code == 0, result.output
    up = read_record(work, "N")
    assert up.status == "completed"
    assert up.calls["stored"] == up.calls["planned"] and up.calls["failed"] == 0
    assert up.outcomes["M"] == 0
    outcomes = pq.read_table(folder.outcomes).column("outcome").to_pylist()
    assert "M" not in outcomes
    assert folder.summary.stat().st_mtime_ns > stale_summary  # the replay ran again
    assert up.report is not None and Path(up.report).stat().st_mtime_ns > stale_summary


def test_a_running_record_whose_lock_is_free_is_interrupted(work: WorkDir) -> None:
    """The process that wrote `running` died (SIGKILL): nobody holds the run's lock."""
    from tasks.runs.jobs import resume_command, scan_records

    write_record(work, running_record("dead"))
    write_record(work, running_record("alive"))
    with RunLock(work, "alive"):
        status = {e.run_id: e.status for e in scan_records(work)}
    assert status == {"dead": "interrupted", "alive": "running"}
    assert resume_command("dead") == "judgeline rerun-failed dead"


def test_resume_kind_follows_the_stage_the_run_stopped_in(work: WorkDir) -> None:
    """One command resumes any run: how depends on what the run left behind."""
    from tasks.errors import InputError
    from tasks.runs.folder import RunFolder
    from tasks.runs.jobs import resume_kind

    nightly = {"name": "mine", "datasets": [{"kind": "demo"}], "judges": [
        {"name": "j", "base_url": "http://127.0.0.1:9/v1", "model": "m"}]}  # fmt: skip
    judged = {"plan_id": "p", "template": None, "judges": nightly["judges"]}
    configs = {
        "before-judging": nightly,
        "judge-only": judged,
        "live": {**judged, "live": {"rng_seed": 1}},
        "imported": {"import": "judgebench", "files": ["a.jsonl"]},
    }
    for run_id, config in configs.items():
        write_record(work, running_record(run_id).model_copy(update={"config": config}))
    judged_run = running_record("judged").model_copy(update={"config": nightly})
    write_record(work, judged_run)
    RunFolder(work, "judged").info.write_text("{}")  # its judge stage ended
    kinds = {run_id: resume_kind(work, run_id)[0] for run_id in [*configs, "judged"]}
    assert kinds == {"before-judging": "nightly", "judge-only": "judge", "live": "live",
                     "imported": "import", "judged": "rerun"}  # fmt: skip
    with pytest.raises(InputError, match="no run 'nosuch'"):
        resume_kind(work, "nosuch")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_judge_run_has_a_record_that_runs_and_show_know(work: WorkDir, tmp_path: Path) -> None:
    from support import stage_demo_plan
    from typer.testing import CliRunner

    from flows.cli import app
    from simjudge.server import SimJudgeServer
    from tasks.runs.record import read_record

    staged = stage_demo_plan(work, pairs=4, k=2)
    judges = tmp_path / "judges.yaml"
    cli = CliRunner()
    with SimJudgeServer() as server:
        judges.write_text(
            f"judges: [{{name: s, base_url: '{server.base_url}', model: strong, simulated: true}}]"
        )
        args = ["--work-dir", str(work.root), "judge", staged.plan_id, "--judges", str(judges)]
        judged = cli.invoke(app, [*args, "--run-id", "J", "--no-progress"])
    assert judged.exit_code == 0, judged.output
    record = read_record(work, "J")
    assert record.status == "completed" and record.plan_id == staged.plan_id
    assert record.calls["stored"] == record.calls["planned"] == 16
    listed = cli.invoke(app, ["--work-dir", str(work.root), "runs"])
    assert "J" in listed.output.split() and "16/16" in listed.output
    shown = cli.invoke(app, ["--work-dir", str(work.root), "show", "J"])
    assert "no outcomes yet" in str(shown.exception) and "judgeline remap J" in str(shown.exception)
