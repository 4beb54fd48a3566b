"""Run ids: one safe folder name, checked before anything is written or sent; a folder under
`runs/` that is not a run id is foreign, listed as such and skipped by every reader."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support import bare_record
from typer.testing import CliRunner

from tasks.errors import InputError
from tasks.runfolder import RunFolder, check_run_id, is_run_id
from tasks.workdir import WorkDir

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
    from tasks.jobrecord import scan_records
    from tasks.runrecord import list_records

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
