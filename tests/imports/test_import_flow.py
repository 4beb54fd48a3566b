"""The import flow end to end, and reparse after a parser change: nothing is ever sent."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tasks.parsing as parsing
from flows.imports import NO_REPLAY_K1, import_flow, reparse_flow
from tasks.runfolder import RunFolder
from tasks.runrecord import list_records
from tasks.workdir import WorkDir
from tests.imports.test_judgebench import _file


@pytest.mark.slow
def test_import_then_reparse(
    tmp_path: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = WorkDir.at(tmp_path / "work")
    record = import_flow("judgebench", [str(_file(tmp_path))], str(work.root), "imp-1")
    assert record["status"] == "completed"
    assert record["calls"]["sent"] == 0
    assert record["imported"]["agreement"]["agree"] == 4
    assert record["imported"]["replay"] == NO_REPLAY_K1
    assert Path(record["report"]).is_file()
    (listed,) = list_records(work)
    assert listed.imported is not None and listed.imported["tool"] == "judgebench"

    # A new parser version that reads only strong verdicts differently.
    original = parsing._PARSERS["arena-hard-v1"]  # noqa: SLF001

    def changed(text: str) -> parsing.ParsedReply:
        if "[[A>>B]]" in text:
            return parsing.ParsedReply(label="Tie", strength=None, note=None)
        return original(text)

    monkeypatch.setitem(parsing._PARSERS, "arena-hard-v1", changed)  # noqa: SLF001
    monkeypatch.setattr(parsing, "PARSER_VERSION", "2")
    counts = reparse_flow("imp-1", str(work.root))
    assert counts["parser_version"] == "2"
    assert counts["relabelled"] == 1
    labels = pq.read_table(RunFolder(work, "imp-1").table("labels")).to_pylist()
    assert {r["parser_version"] for r in labels} == {"2"}
    disp = {
        r["pair_id"]: r["disposition"]
        for r in pq.read_table(RunFolder(work, "imp-1").table("dispositions")).to_pylist()
    }
    assert disp["p-left"] == "mixed"
