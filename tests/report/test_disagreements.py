"""The disagreements section: unsettled pairs by identity, inline limit, second page, show."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from typer.testing import CliRunner

from flows.cli import app
from schemas.run import RunRecord
from tasks.errors import InputError
from tasks.imports import build_import, read_imported
from tasks.remap import remap_run, write_remap
from tasks.report.data import build_report
from tasks.report.disagreements import PAGE, disagreements_section, render_pairs_page
from tasks.report.pairs import pair_text, pair_views
from tasks.runs.record import code_version, write_record
from tasks.store.workdir import WorkDir
from tests.imports.test_judgebench import _file


def _run(tmp_path: Path) -> WorkDir:
    work = WorkDir.at(tmp_path / "work")
    built = build_import(work, [read_imported("judgebench", _file(tmp_path))], "run-1")
    write_remap(work, remap_run(work, "run-1"))
    record = RunRecord(
        run_id="run-1", name="import", status="completed", config_hash="0" * 64,
        config={"k": 1}, code=code_version(), started_at=dt.datetime.now(dt.UTC),
        manifest_hash=built.manifest_hash, plan_id=built.plan_id,
    )  # fmt: skip
    write_record(work, record)
    return work


def test_views_label_replies_by_identity(tmp_path: Path) -> None:
    work = _run(tmp_path)
    views = pair_views(work, "run-1")
    # p-swap is stable_A: only the conflict and the incomplete pair are unsettled.
    assert [(v.pair_id, v.disposition) for v in views] == [
        ("p-left", "order_conflict"),
        ("p-odd", "incomplete_M"),
    ]
    left = views[0]
    assert (left.answer_a, left.answer_b) == ("answer A of p-left", "answer B of p-left")
    ab, ba = left.calls
    # Both replies prefer the Left slot; in BA that slot holds identity B.
    assert (ab.left, ab.label, ab.outcome, ab.reply) == ("A", "Left", "A", "[[A>>B]]")
    assert (ba.left, ba.label, ba.outcome, ba.reply) == ("B", "Left", "B", "[[A>B]]")
    assert ba.recorded == "A>B"
    text = pair_text(left)
    assert "ORDER BA (left: B, right: A): parsed Left -> outcome B" in text
    assert "answer B of p-left" in text
    (swap,) = pair_views(work, "run-1", "p-swap")
    assert swap.disposition == "stable_A" and swap.calls[1].outcome == "A"
    odd = views[1]
    assert odd.calls[1].reply is None and odd.calls[1].outcome == "M"


def test_inline_limit_moves_the_rest_to_the_second_page(tmp_path: Path) -> None:
    views = pair_views(_run(tmp_path), "run-1")
    section = disagreements_section(views, inline=1)
    (group,) = section.groups
    assert [v.pair_id for v in group.views] == ["p-left"] and group.elsewhere == 1
    assert section.page == PAGE
    assert section.dispositions == [
        ("order_conflict", "order conflict"),
        ("incomplete_M", "incomplete (no reply)"),
    ]
    page = render_pairs_page(views, "rest", inline=1)
    assert "p-odd" in page and "p-left" not in page
    assert disagreements_section(views).page == ""


def test_report_and_show(tmp_path: Path) -> None:
    work = _run(tmp_path)
    html = build_report(work, "run-1").read_text("utf-8")
    assert html.count('<details class="pair"') == 2
    assert 'data-disposition="order_conflict"' in html and "question p-left" in html
    assert not (work.root / "runs" / "run-1" / PAGE).exists()
    result = CliRunner().invoke(
        app, ["--work-dir", str(work.root), "show", "run-1", "--pair", "p-left"]
    )
    assert result.exit_code == 0, result.output
    assert "disposition order_conflict; key B" in result.output
    assert "ORDER AB (left: A, right: B): parsed Left -> outcome A" in result.output
    missing = CliRunner().invoke(
        app, ["--work-dir", str(work.root), "show", "run-1", "--pair", "nope"]
    )
    assert isinstance(missing.exception, InputError) and "nope" in str(missing.exception)


def test_views_name_the_answers_models_and_map_the_files_verdict(tmp_path: Path) -> None:
    from tests.imports.test_arenahard import judgment_file

    work = WorkDir.at(tmp_path / "work")
    built = build_import(work, [read_imported("arena-hard", judgment_file(tmp_path))], "ah")
    write_remap(work, remap_run(work, "ah"))
    record = RunRecord(
        run_id="ah", name="import", status="completed", config_hash="0" * 64,
        config={"k": 1}, code=code_version(), started_at=dt.datetime.now(dt.UTC),
        manifest_hash=built.manifest_hash, plan_id=built.plan_id,
    )  # fmt: skip
    write_record(work, record)
    (view,) = pair_views(work, "ah", "q2")
    assert (view.label_a, view.label_b) == ("model-m (judged model)", "base-b (baseline)")
    ab, ba = view.calls
    # games[0] is order BA: the file's A>B is its Left slot, identity B (the baseline).
    assert (ba.recorded, ba.recorded_label, ba.recorded_outcome) == ("A>B", "Left", "B")
    assert (ab.recorded, ab.recorded_label, ab.recorded_outcome) == ("A=B", "Tie", "T")
    text = pair_text(view)
    assert "ANSWER A: model-m (judged model)" in text and "ANSWER B: base-b (baseline)" in text
    assert "the file records Left -> B (it wrote 'A>B')" in text
    html = build_report(work, "ah").read_text("utf-8")
    assert "answer A: model-m (judged model)" in html
    assert "file: Left &#8594; B" in html and "file: A&gt;B" not in html
