"""Reads of some runs (`warehouse_reads(work, runs=...)`): the same answers as the warehouse,
without building it."""

from __future__ import annotations

import logging
import re

import pandas as pd
import pytest
from test_warehouse import write_run

from tasks import warehouse
from tasks.store.workdir import WorkDir
from tasks.warehouse import query, report_names, warehouse_reads


def _run_queries() -> list[str]:
    """Every report query about one run (it takes `$run_id`)."""
    from importlib import resources

    folder = resources.files("tasks.sql")
    return [
        n
        for n in report_names()
        if re.search(r"\$run_id\b", folder.joinpath(f"{n}.sql").read_text("utf-8"))
    ]


def _answers(work: WorkDir, run_id: str, runs: list[str] | None) -> dict[str, pd.DataFrame]:
    with warehouse_reads(work, runs=runs):
        return {name: query(work, name, run_id=run_id) for name in _run_queries()}


@pytest.mark.parametrize("damaged", [False, True])
def test_a_read_of_a_run_answers_as_the_warehouse(
    work: WorkDir, damaged: bool, caplog: pytest.LogCaptureFixture
) -> None:
    write_run(work, "run-1", 1, pairs=12)
    write_run(work, "run-2", 2, pairs=7)
    if damaged:  # the warehouse leaves every file of run-1 out, with a warning
        with (work.run_dir("run-1") / "outcomes.parquet").open("r+b") as f:
            f.truncate(300)
    assert len(_run_queries()) >= 8
    for run_id in ("run-1", "run-2"):
        with caplog.at_level(logging.WARNING):
            scoped = _answers(work, run_id, [run_id])
        assert not work.warehouse.exists()  # neither built nor checked
        # Only a read of run-1 looks at run-1's files (a skipped run is said once).
        warned = any("run-1" in r.getMessage() for r in caplog.records)
        assert warned == (damaged and run_id == "run-1")
        caplog.clear()
        full = _answers(work, run_id, None)
        for name, frame in full.items():
            pd.testing.assert_frame_equal(scoped[name], frame, check_dtype=True, obj=name)
        assert full["report_disclosure"].empty == (damaged and run_id == "run-1")
        assert not work.warehouse.exists()  # a read across runs writes no file either


def test_a_read_of_a_run_asked_about_another_answers_from_the_warehouse(work: WorkDir) -> None:
    write_run(work, "run-1", 1, pairs=3)
    write_run(work, "run-2", 2, pairs=4)
    with warehouse_reads(work, runs=["run-1"]):
        assert len(query(work, "report_disclosure", run_id="run-2")) == 1  # not empty
        with warehouse_reads(work, runs=["run-1", "run-2"]):  # not held: a read of its own
            assert len(query(work, "report_disclosure", run_id="run-2")) == 1
        with warehouse_reads(work):
            assert warehouse._reading.get().runs is None  # type: ignore[union-attr]
    assert not work.warehouse.exists()  # reads write nothing


def test_the_next_read_of_a_run_gives_the_last_answers_until_a_file_changes(
    work: WorkDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's summary after its report: the same questions about the same files are
    answered without a connection; a rewritten table file is read afresh."""
    write_run(work, "run-1", 1, pairs=5)
    opened: list[int] = []
    connect = warehouse._views_connection

    def counting(files_of):  # type: ignore[no-untyped-def]
        opened.append(1)
        return connect(files_of)

    monkeypatch.setattr(warehouse, "_views_connection", counting)
    first = _answers(work, "run-1", ["run-1"])
    assert len(opened) == 1
    again = _answers(work, "run-1", ["run-1"])
    assert len(opened) == 1  # no connection: every answer was kept
    for name, frame in first.items():
        pd.testing.assert_frame_equal(again[name], frame, obj=name)
    for table in work.run_dir("run-1").glob("*.parquet"):
        table.unlink()
    write_run(work, "run-1", 2, pairs=8)  # the run's tables written anew
    changed = _answers(work, "run-1", ["run-1"])
    assert len(opened) == 2
    pd.testing.assert_frame_equal(
        changed["report_summary"], _answers(work, "run-1", None)["report_summary"]
    )
