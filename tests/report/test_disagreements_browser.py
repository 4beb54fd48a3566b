"""The o1-mini JudgeBench import's report in headless Chromium: its 76 order conflicts open
one by one (20 inline, the rest on the page beside the report) and the filters work."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from pathlib import Path

import pytest
from test_report_browser import FLAGS, chromium  # noqa: F401  (the fixture)

from schemas.run import RunRecord
from tasks.imports import build_import, read_imported
from tasks.remap import remap_run, write_remap
from tasks.report.data import build_report
from tasks.report.disagreements import PAGE
from tasks.runs.record import code_version, write_record
from tasks.store.workdir import WorkDir

O1_MINI = Path(
    "/work/shared/data/judgebench/dataset=judgebench,response_model=gpt-4o-2024-05-13,"
    "judge_name=arena_hard,judge_model=o1-mini-2024-09-12.jsonl"
)

# Opens every pair, measures what the opened pair shows, then filters to order conflicts.
PROBE = """<script>
var pairs = document.querySelectorAll('details.pair');
var readable = 0, conflicts = 0;
pairs.forEach(function (d) {
  var closed = d.getBoundingClientRect().height;
  d.open = true;
  var pres = d.querySelectorAll('pre');
  var marked = d.querySelectorAll('.pair-reply .verdict').length;
  if (d.getBoundingClientRect().height > closed + 200 && pres.length >= 5 && marked === 2
      && pres[pres.length - 1].getBoundingClientRect().height > 10) { readable += 1; }
  if (d.getAttribute('data-disposition') === 'order_conflict') { conflicts += 1; }
});
var select = document.querySelector('select[data-filter="disposition"]');
select.value = 'mixed';
select.dispatchEvent(new Event('change'));
var visible = Array.prototype.filter.call(pairs, function (d) { return !d.hidden; }).length;
document.body.setAttribute('data-probe', [pairs.length, readable, conflicts, visible].join(','));
document.body.setAttribute('data-count',
  document.querySelector('[data-pair-count]').textContent);
</script>"""


def _probe(browser: Path, page: Path, profile: Path) -> tuple[list[int], str]:
    probed = page.with_name("probe-" + page.name)
    probed.write_text(page.read_text("utf-8").replace("</body>", PROBE + "</body>"), "utf-8")
    proc = subprocess.run(
        [str(browser), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    found = re.search(r'data-probe="([^"]*)"', proc.stdout)
    count = re.search(r'data-count="([^"]*)"', proc.stdout)
    assert found and count, "the probe script did not run"
    return [int(x) for x in found.group(1).split(",")], count.group(1)


@pytest.mark.slow
def test_o1_mini_conflicts_open_one_by_one(
    chromium: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    if not O1_MINI.is_file():
        pytest.skip(f"{O1_MINI} is not on this machine")
    work = WorkDir.at(tmp_path / "work")
    built = build_import(work, [read_imported("judgebench", O1_MINI)], "o1")
    write_remap(work, remap_run(work, "o1"))
    write_record(
        work,
        RunRecord(
            run_id="o1",
            name="import judgebench",
            status="completed",
            config_hash="0" * 64,
            config={"k": 1},
            code=code_version(),
            started_at=dt.datetime.now(dt.UTC),
            manifest_hash=built.manifest_hash,
            plan_id=built.plan_id,
        ),  # fmt: skip
    )
    report = build_report(work, "o1")
    page = report.with_name(PAGE)
    assert "76 order conflict, 34 mixed" in report.read_text("utf-8")
    inline, inline_count = _probe(chromium, report, tmp_path / "p1")
    rest, rest_count = _probe(chromium, page, tmp_path / "p2")
    # 20 inline (all conflicts, which come first), 56 conflicts and 34 mixed beside it.
    assert inline == [20, 20, 20, 0] and inline_count == "0 of 20 shown"
    assert rest == [90, 90, 56, 34] and rest_count == "34 of 90 shown"
    assert inline[2] + rest[2] == 76
