"""A work dir that cannot be written is still read: the views behind `show`, `trends`,
`advise` and `report` are made in memory (a read writes no warehouse file anywhere)."""

from __future__ import annotations

import logging

import pytest
from support import read_only
from test_warehouse import write_run

from tasks.judging.cache import read_attempts, read_replies, write_replies
from tasks.store.workdir import WorkDir
from tasks.warehouse import query


def test_a_read_only_work_dir_is_queried(work: WorkDir) -> None:
    write_run(work, "run-1", 1)
    writable = query(work, "report_scores", run_id="run-1")
    assert not (work.root / "warehouse.duckdb").exists()  # a read built no file
    write_run(work, "run-2", 2, pairs=10)
    with read_only(work.root) as root:
        frozen = WorkDir(root)
        scores = query(frozen, "report_scores", run_id="run-1")
        assert scores.equals(writable)
        assert set(query(frozen, "report_scores", run_id="run-2")["pairs"]) == {10}
    assert not (work.root / "warehouse.duckdb").exists()


def test_reading_the_cache_of_a_read_only_work_dir_writes_nothing(
    work: WorkDir, caplog: pytest.LogCaptureFixture
) -> None:
    """A damaged file cannot be moved aside, a missing folder cannot be made: both are
    read around, with the warning."""
    from tests.judging.test_cache import _reply

    write_replies(work, [_reply("ok")])
    (work.replies / "junk.parquet").write_bytes(b"not parquet")
    with read_only(work.root) as root, caplog.at_level(logging.WARNING, "tasks.judging.cache"):
        frozen = WorkDir(root)
        assert read_replies(frozen).column("call_key").to_pylist() == ["ok"]
        assert read_attempts(frozen).num_rows == 0
        assert frozen.root.joinpath("cache", "replies", "junk.parquet").exists()
    assert any("junk.parquet" in r.getMessage() for r in caplog.records)
