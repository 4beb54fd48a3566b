"""Run ids: one safe folder name, checked before anything is written or sent; a folder under
`runs/` that is not a run id is foreign, listed as such and skipped by every reader."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import AS_OTHER_UID, OTHER_UID, as_other_user, bare_record, shared_folder
from typer.testing import CliRunner

from tasks.errors import InputError, IntegrityError
from tasks.runs.folder import RunFolder, check_run_id, is_run_id
from tasks.store.workdir import WorkDir

BAD_IDS = ["../escape", "a/b", "/tmp/x", " ", "a\tb", "", ".hidden", "-x", "x" * 129, "é", "a b"]
GOOD_IDS = ["A", "r1", "20260101T020000Z-a1b2c3", "run-0123abcd", "night_3.v2", "x" * 128]


@pytest.mark.parametrize("run_id", GOOD_IDS)
def test_good_run_ids_pass(run_id: str) -> None:
    assert is_run_id(run_id)
    assert check_run_id(run_id) == run_id


@pytest.mark.parametrize("run_id", BAD_IDS, ids=repr)
def test_bad_run_ids_are_refused_in_one_line(run_id: str) -> None:
    assert not is_run_id(run_id)
    with pytest.raises(InputError, match="not a usable run id") as caught:
        check_run_id(run_id)
    message = str(caught.value)
    assert repr(run_id) in message and "\n" not in message


@pytest.mark.parametrize("run_id", [*BAD_IDS, "{tmp}/x"], ids=repr)
def test_a_bad_run_id_never_gets_a_folder(tmp_path: Path, run_id: str) -> None:
    work = WorkDir(tmp_path / "work")
    with pytest.raises(InputError):
        RunFolder(work, run_id.replace("{tmp}", str(tmp_path))).create()
    assert list(tmp_path.iterdir()) == []


record = bare_record


def plant_foreign(work: WorkDir, name: str, source: RunFolder | None = None) -> Path:
    """A folder under runs/ named `name` holding a record (and a run's tables, copied)."""
    folder = work.root / "runs" / name
    if source is not None:
        shutil.copytree(source.path, folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "record.json").write_text(record("x").model_dump_json(), "utf-8")
    return folder


def test_runs_lists_a_foreign_folder_and_readers_skip_it(work: WorkDir) -> None:
    from tasks.runs.jobs import scan_records
    from tasks.runs.record import list_records

    RunFolder(work, "good").write_record(record("good"))
    plant_foreign(work, "a\tb")
    plant_foreign(work, ".hidden")
    entries = {e.run_id: e for e in scan_records(work)}
    assert entries["good"].status == "completed"
    for name in ("a\tb", ".hidden"):
        assert entries[name].status == "foreign" and entries[name].record is None
        assert repr(name) in str(entries[name].problem)
        assert "every command skips it" in str(entries[name].problem)
    assert [r.run_id for r in list_records(work)] == ["good"]


def test_the_warehouse_skips_foreign_folders(work: WorkDir) -> None:
    """A folder `a<TAB>b` holding a run's tables once failed every later `trends`: its path
    cannot go into a view."""
    from schemas import OutcomeRow, arrow_schema
    from tasks.warehouse import build_warehouse, query

    folder = RunFolder(work, "good").create()
    pq.write_table(arrow_schema(OutcomeRow).empty_table(), folder.outcomes)
    plant_foreign(work, "a\tb", folder)
    build_warehouse(work)  # would raise: the path holds control characters
    assert query(work, "report_trends").empty


def test_commands_refuse_a_bad_run_id_before_anything(work: WorkDir, tmp_path: Path) -> None:
    """Every command that takes a run id refuses a bad one in one paragraph naming it, and
    writes nothing (in-process: no Prefect is started)."""
    from flows.cli import app

    config = tmp_path / "c.yaml"
    config.write_text(
        "name: n\ndatasets: [{kind: demo}]\nk: 2\n"
        "judges: [{name: j, base_url: 'http://127.0.0.1:9/v1', model: m}]\n",
        "utf-8",
    )
    judgebench = tmp_path / "jb.jsonl"
    judgebench.write_text("", "utf-8")
    commands = [
        ["run", str(config), "--run-id", "{id}"],
        ["judge", "abc", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--run-id", "{id}"],
        ["live", "abc", "--judges", str(config), "--run-id", "{id}"],
        ["import", "judgebench", str(judgebench), "--run-id", "{id}"],
        ["rerun-failed", "{id}"],
        ["reparse", "{id}"],
        ["remap", "{id}"],
        ["show", "{id}"],
        ["report", "{id}"],
        ["failures", "{id}"],
        ["advise", "{id}"],
        ["diff", "{id}", "other"],
        ["diff", "other", "{id}"],
    ]
    runner = CliRunner()
    for command in commands:
        for bad in ("../escape", "a\tb", f"{tmp_path}/x"):
            args = [a.replace("{id}", bad) for a in command]
            result = runner.invoke(app, ["--work-dir", str(work.root), *args])
            assert isinstance(result.exception, InputError), (args, result.output)
            assert "not a usable run id" in str(result.exception), (args, result.exception)
            assert not work.root.exists(), args
    assert not (tmp_path / "escape").exists() and not (tmp_path / "x").exists()


PLANT = """
import json, os, sys
run = os.path.join(sys.argv[1], "runs", "x")
os.makedirs(run)
info = {"run_id": "x", "plan_id": "p" * 16, "manifest_hash": "m" * 64, "judges": []}
record = {"run_id": "x", "name": "theirs", "status": "completed", "config_hash": "h",
          "config": {}, "code": {"commit": None, "dirty": None, "packages": {}},
          "started_at": "2026-01-01T00:00:00Z"}
for name, value in (("run.json", info), ("record.json", record)):
    with open(os.path.join(run, name), "w") as out:
        json.dump(value, out)
"""


def _entry_points(run_id: str, work_dir: str) -> dict[str, Callable[[], Any]]:
    """Every flow (and stage a deployment or a Python caller runs) that takes a run id,
    called as its flow run would call it."""
    from flows.imports import import_flow, reparse_flow
    from flows.judge import judge_stage, rerun_failed_stage
    from flows.live import live_flow
    from flows.nightly import nightly_flow, replay_policies_flow, rerun_run_flow
    from flows.remap import remap_task
    from flows.report import report_task
    from schemas.judge import JudgeSpec

    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:9/v1", model="m")
    config = {"datasets": [{"kind": "demo"}], "judges": [judge.model_dump(mode="json")]}
    work = WorkDir.at(work_dir)
    return {
        "rerun": lambda: asyncio.run(rerun_run_flow.fn(run_id, work_dir)),
        "replay": lambda: replay_policies_flow.fn(run_id, work_dir=work_dir),
        "reparse": lambda: asyncio.run(reparse_flow.fn(run_id, work_dir)),
        "live": lambda: asyncio.run(live_flow.fn(run_id, "p" * 16, [judge], 1, work_dir=work_dir)),
        "judge": lambda: asyncio.run(judge_stage(run_id, "p" * 16, [judge], work_dir=work_dir)),
        "rerun stage": lambda: asyncio.run(rerun_failed_stage(run_id, work_dir)),
        "remap": lambda: remap_task.fn(work, run_id),
        "report": lambda: report_task.fn(work_dir, run_id),
        "nightly": lambda: asyncio.run(
            nightly_flow.fn(config=config, run_id=run_id, work_dir=work_dir)
        ),
        "import": lambda: asyncio.run(
            import_flow.fn("judgebench", ["/nonexistent.jsonl"], work_dir, run_id)
        ),
    }


def test_flows_refuse_a_run_id_outside_runs_before_reading_it() -> None:
    """A deployment run's `run_id` is a parameter anyone who can create runs sets: with
    `../../<elsewhere>/runs/x`, rerun-failed read another user's run and wrote its record
    into the owner's `runs/`. Every flow refuses it before anything is read (the other
    user's run is planted by another uid where the tests run as root)."""
    with shared_folder() as shared:
        as_other_user(PLANT.replace("sys.argv[1]", repr(str(shared / "other"))))
        theirs = shared / "other" / "runs" / "x"
        assert (theirs / "run.json").is_file()
        if AS_OTHER_UID:
            assert (theirs / "run.json").stat().st_uid == OTHER_UID
        owner = shared / "owner"
        (owner / "runs").mkdir(parents=True)  # the path resolves through it
        before = sorted(p.name for p in theirs.iterdir())
        bad = "../../other/runs/x"
        for name, call in _entry_points(bad, str(owner)).items():
            with pytest.raises(InputError, match="not a usable run id") as caught:
                call()
            assert repr(bad) in str(caught.value), name
            assert list(owner.rglob("*")) == [owner / "runs"], name
        assert sorted(p.name for p in theirs.iterdir()) == before


def test_a_record_naming_another_run_is_damaged(work: WorkDir) -> None:
    """A record is its own folder's: one that names another run (a copied folder, or a
    planted `../x`) is refused as damaged by every reader, never followed."""
    from tasks.runs.jobs import scan_records
    from tasks.runs.record import list_records, read_record

    RunFolder(work, "good").write_record(record("good"))
    for folder, named in (("copied", "good"), ("planted", "../../elsewhere/runs/x")):
        path = RunFolder(work, folder).create().record
        path.write_text(record("good").model_copy(update={"run_id": named}).model_dump_json())
        with pytest.raises(IntegrityError, match="names run") as caught:
            read_record(work, folder)
        assert str(path) in str(caught.value)
    assert [r.run_id for r in list_records(work)] == ["good"]
    entries = {e.run_id: e for e in scan_records(work)}
    assert entries["good"].status == "completed"
    assert entries["copied"].status == entries["planted"].status == "damaged"
    assert "names run" in str(entries["planted"].problem)
