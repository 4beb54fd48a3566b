"""`judgeline demo --nights 2` at a small scale: two nights on consecutive probe dates, the
drift of `strong` caught by the probe alone, the diff of the two nights and the trends page."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
from pathlib import Path

import pytest
from support import REPO

from tasks.runs.record import list_records
from tasks.store.workdir import WorkDir

pytestmark = pytest.mark.slow

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[WorkDir, str]:
    work = WorkDir(tmp_path_factory.mktemp("demo-nights") / "work")
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL",)}
    env.pop("JUDGELINE_WORK_DIR", None)
    env["COLUMNS"] = "200"
    argv = [JUDGELINE, "--work-dir", str(work.root), "demo", "--nights", "2", "--pairs", "20"]
    run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    return work, run.stdout


def test_each_night_judges_its_pairs_on_its_own_date(demo: tuple[WorkDir, str]) -> None:
    work, out = demo
    today = dt.datetime.now(dt.UTC).date()
    assert f"night 1 of 2 (simulated date {today - dt.timedelta(days=1)}): 18 pairs\n" in out
    assert f"night 2 of 2 (simulated date {today}): 20 pairs; strong has drifted" in out
    first, second = sorted(list_records(work), key=lambda r: r.started_at)
    assert [r.name for r in (first, second)] == ["demo", "demo"]
    assert (first.probe or {})["date"] == (today - dt.timedelta(days=1)).isoformat()
    assert (second.probe or {})["date"] == today.isoformat()
    # The second night sends only its 2 new pairs (6 judge configs x 4 seeds x 2 orders).
    assert second.calls["sent"] == 2 * 6 * 8
    assert f"run {second.run_id}: 960 planned calls, 96 sent, 864 reused from the cache" in out


def test_the_probe_catches_the_drift_the_diff_cannot_see(demo: tuple[WorkDir, str]) -> None:
    work, out = demo
    first, second = sorted(list_records(work), key=lambda r: r.started_at)
    agreement = (second.probe or {})["agreement"]
    assert set(agreement) == {"strong · low", "strong · high"}
    assert all(a["agreement"] < 0.8 for a in agreement.values())
    assert {a["alarm"] for a in second.alarms or []} >= {"probe_agreement"}
    assert re.search(r"^alarm probe_agreement: .*judge_config strong · low", out, re.M)
    assert f"{first.run_id} -> {second.run_id}\npairs: 18 shared, 2 added, 0 removed" in out
    # Cached calls: the shared pairs' scores and agreement (alpha) cannot move, for each of
    # the 6 judge configs.
    assert out.count("+0.000 (+0.000 to +0.000)") == 2 * 6


def test_the_trends_page_holds_both_nights(demo: tuple[WorkDir, str]) -> None:
    work, out = demo
    page = Path(work.root / "trends.html")
    assert f"trends: {page}" in out
    text = page.read_text("utf-8")
    for record in list_records(work):
        assert record.run_id in text


def test_every_night_ends_as_the_readme_says(demo: tuple[WorkDir, str]) -> None:
    """The README once said every night ends `degraded` by noisy's invalid replies; every
    night completes, with noisy's valid_share alarms."""
    work, out = demo
    assert {r.status for r in list_records(work)} == {"completed"}
    assert re.search(r"^alarm valid_share: config low, judge noisy", out, re.M)
    readme = " ".join((REPO / "README.md").read_text("utf-8").split())
    assert "Every night ends `completed`" in readme
    assert "is also `degraded` by `noisy`" not in readme
