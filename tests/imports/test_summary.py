"""What `judgeline import` prints per judge config: pairs, replies, replies without a verdict by
reason, agreement with the file's verdicts and the dispositions."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from flows.imports import no_replay_reason
from schemas.run import RunRecord
from tasks.imports import build_import, import_summary, read_imported, summary_lines
from tasks.remap import remap_run, write_remap
from tasks.report.data import build_report
from tasks.runs.folder import RunFolder
from tasks.runs.record import code_version, write_record
from tasks.store.workdir import WorkDir
from tests.imports.test_judgebench import NAME, _entry, _line, _write


def test_summary_counts_each_judge_config(tmp_path: Path) -> None:
    path = _write(
        tmp_path / NAME,
        [
            _line("p-stable", "A>B", _entry("[[A>B]]", "A>B"), _entry("[[B>A]]", "B>A")),
            _line("p-left", "B>A", _entry("[[A>>B]]", "A>B"), _entry("[[A>B]]", "A>B")),
            _line("p-none", "A>B", None, _entry("", None)),
            _line("p-two", "A>B", _entry("[[A>B]] or [[B>A]]", "B>A"), _entry("[[A=B]]", "A=B")),
            _line("p-odd", "A>B", _entry("x [[A>A]]", "A>A"), _entry("[[ABSTAIN]]", None)),
        ],
    )
    work = WorkDir.at(tmp_path / "work")
    build_import(work, [read_imported("judgebench", path)], "run-s")
    write_remap(work, remap_run(work, "run-s"))
    (summary,) = import_summary(RunFolder(work, "run-s"))
    assert summary == {
        "judge": "judge-x",
        "config": "arena_hard",
        "pairs": 5,
        "seeds": 1,
        "replies": 9,
        "without_reply": 1,
        "without_verdict": {
            "conflicting verdict labels": 1,
            "verdict label is not one of the template's labels": 1,
            "empty reply": 1,
            "abstained": 1,
        },
        # The file's null decision agrees with Invalid and Abstain; its B>A on p-two does not.
        "agreement": {"compared": 9, "agree": 8},
        "dispositions": {
            "stable_A": 1,
            "order_conflict": 1,
            "incomplete_M": 1,
            "incomplete_I": 2,
        },
    }


def test_summary_lines_say_each_count() -> None:
    lines = summary_lines(
        {
            "judge": "j", "config": "c", "pairs": 3, "seeds": 1, "replies": 5,
            "without_reply": 1, "without_verdict": {"empty reply": 1, "abstained": 2},
            "agreement": {"compared": 5, "agree": 4},
            "dispositions": {"stable_A": 1, "incomplete_M": 2},
        }
    )  # fmt: skip
    assert lines == [
        "j / c: 3 pairs x 1 seed(s), 5 replies, 1 recorded without a reply",
        "  replies without a verdict: 3 (2 abstained, 1 empty reply)",
        "  parser agrees with the files' recorded verdicts on 4 of 5 replies",
        "  dispositions (pair x seed): incomplete_M 2, stable_A 1",
    ]


@pytest.mark.parametrize(
    ("k", "part"), [(1, "K = 1 (one file"), (2, None), (3, "K = 3"), (4, None)]
)
def test_why_a_run_is_not_replayed(k: int, part: str | None) -> None:
    reason = no_replay_reason(k)
    assert reason is None if part is None else (reason is not None and part in reason)


def test_a_k1_report_says_why_it_has_no_scores(tmp_path: Path) -> None:
    from tests.imports.test_judgebench import _file

    work = WorkDir.at(tmp_path / "work")
    file = read_imported("judgebench", _file(tmp_path))
    built = build_import(work, [file], "k1")
    write_remap(work, remap_run(work, "k1"))
    record = RunRecord(
        run_id="k1", name="import judgebench", status="completed", config_hash="0" * 64,
        config={"k": 1}, code=code_version(), started_at=dt.datetime.now(dt.UTC),
        manifest_hash=built.manifest_hash, plan_id=built.plan_id,
        imported=built.imported | {"replay": no_replay_reason(1)},
    )  # fmt: skip
    write_record(work, record)
    html = build_report(work, "k1").read_text("utf-8")
    assert "No scores in this run (not replayed: K = 1 (one file" in html


def test_the_real_o1_mini_file_summary(tmp_path: Path, shared_data: Path) -> None:
    """The README's figures for the real JudgeBench file of o1-mini's replies."""
    from tests.prompts.test_parsing import O1_MINI

    work = WorkDir.at(tmp_path / "work")
    build_import(work, [read_imported("judgebench", shared_data / O1_MINI)], "o1")
    write_remap(work, remap_run(work, "o1"))
    (summary,) = import_summary(RunFolder(work, "o1"))
    assert (summary["pairs"], summary["replies"], summary["without_reply"]) == (350, 700, 0)
    assert summary["without_verdict"] == {}
    assert summary["agreement"] == {"compared": 700, "agree": 700}
    assert summary["dispositions"] == {
        "stable_A": 121, "stable_B": 114, "order_conflict": 76, "mixed": 34, "stable_tie": 5,
    }  # fmt: skip
