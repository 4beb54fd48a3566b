"""A leaderboard end to end: six systems of known quality, an answers table, the nightly
flow against the simulated judge, then `judgeline leaderboard RUN --json`."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli import app
from schemas.config import DatasetSpec, RunConfig
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.ingest.answers import read_answers
from tasks.ingest.manifest import build_manifest_table
from tasks.store.workdir import WorkDir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "report"))
from test_report_browser import FLAGS, chromium  # noqa: E402, F401  (the fixture)

pytestmark = pytest.mark.slow

QUESTIONS = 40
BEATS_BASELINE = {"s1": 0.95, "s2": 0.8, "s3": 0.62, "s4": 0.33, "s5": 0.1}
"""Share of questions on which each system's answer is the better one against the baseline's."""
EXPECTED = ["s1", "s2", "s3", "base", "s4", "s5"]
FIELDS = {"system", "score", "lower", "upper", "win_rate", "wins", "ties", "losses",
          "conflicts", "rank"}  # fmt: skip


def _answers(path: Path) -> Path:
    rows = [
        {"question_id": f"q{q}", "question": f"Question {q}: explain item {q}.", "system": s,
         "answer": f"The answer of {s} to question {q}." + " More." * ((q * len(s)) % 4)
         + ("\n- a list item" if s in ("s2", "s4") else "")}
        for q in range(QUESTIONS) for s in ["base", *BEATS_BASELINE]
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def _truth(path: Path) -> Any:
    """The same pairs keyed by quality: the simulated judge prefers the keyed answer (with
    its skill); the run's own manifest has no key."""
    loaded = read_answers(path, baseline="base")
    keyed = []
    for pair in loaded.pairs:
        meta = json.loads(pair.metadata)
        better = int(meta["question_id"][1:]) < round(BEATS_BASELINE[meta["model_a"]] * QUESTIONS)
        keyed.append(pair.model_copy(update={"key": "A" if better else "B"}))
    return build_manifest_table(keyed)[1]


@pytest.fixture(scope="module")
def ranked(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[WorkDir, dict[str, Any]]:
    from flows.nightly import nightly_flow

    folder = tmp_path_factory.mktemp("board")
    answers = _answers(folder / "answers.jsonl")
    work = WorkDir(folder / "work")
    with SimJudgeServer(manifest=_truth(answers)) as server:
        judge = JudgeSpec(
            name="strong", base_url=server.base_url, simulated=True, model="strong",
            max_concurrency=16,
        )  # fmt: skip
        config = RunConfig(
            name="board",
            datasets=[DatasetSpec(kind="answers", path=str(answers), baseline="base")],
            judges=[judge],
            k=4,
        )
        params = {"config": config.model_dump(mode="json"), "work_dir": str(work.root)}
        record = asyncio.run(nightly_flow(**params, run_id="b1"))
        asyncio.run(nightly_flow(**params, run_id="b2"))  # a second night, all from the cache
    assert record["status"] == "completed"
    result = CliRunner().invoke(
        app, ["--work-dir", str(work.root), "leaderboard", "b1", "--json", "--replicates", "300"]
    )
    assert result.exit_code == 0, result.output
    return work, json.loads(result.output)


def test_six_systems_rank_by_their_quality(ranked: tuple[WorkDir, dict[str, Any]]) -> None:
    _, result = ranked
    (board,) = result["boards"]
    assert board["baseline"] == "base" and board["questions"] == QUESTIONS
    assert [row["system"] for row in board["systems"]] == EXPECTED
    assert [row["rank"] for row in board["systems"]] == [1, 2, 3, 4, 5, 6]
    for rule in ("reference", "drop-conflicts", "per-order"):
        assert [r["system"] for r in board["rules"][rule]["systems"]] == EXPECTED


def test_the_json_fields_of_each_system(ranked: tuple[WorkDir, dict[str, Any]]) -> None:
    _, result = ranked
    (board,) = result["boards"]
    for row in board["systems"]:
        assert set(row) >= FIELDS
        assert row["lower"] <= row["score"] <= row["upper"]
        if row["system"] == "base":
            assert row["score"] == 1000 and row["win_rate"] == 50
            continue
        # every system met the baseline on each question, K = 4 seeds
        assert row["wins"] + row["ties"] + row["losses"] <= QUESTIONS * 4
        assert row["win_rate_lower"] <= row["win_rate"] <= row["win_rate_upper"]
        assert (row["score"] > 1000) == (row["win_rate"] > 50)
    base = next(r for r in board["systems"] if r["system"] == "base")
    others = [r for r in board["systems"] if r["system"] != "base"]
    assert base["wins"] == sum(r["losses"] for r in others)
    assert base["conflicts"] == sum(r["conflicts"] for r in others)


def test_style_control_and_another_baseline(ranked: tuple[WorkDir, dict[str, Any]]) -> None:
    work, _ = ranked
    result = CliRunner().invoke(
        app,
        ["--work-dir", str(work.root), "leaderboard", "b1", "--json", "--replicates", "50",
         "--baseline", "s3", "--style-control", "--length-control", "--rule", "per-order"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (board,) = json.loads(result.output)["boards"]
    assert board["baseline"] == "s3" and board["rule"] == "per-order"
    rows = {r["system"]: r for r in board["systems"]}
    assert rows["s3"]["score"] == 1000 and rows["s1"]["score"] > 1000 > rows["s5"]["score"]
    v2 = {"length", "header_density", "list_density", "bold_density"}
    assert {"length", "list_density"} <= set(board["style"]) <= v2
    assert board["style_check"]["set"] == "v2"
    # against s3, only the system that met it (the manifest's baseline) has an LC rate
    assert rows["s3"]["lc_win_rate"] == 50 and rows["base"]["lc_win_rate"] is not None
    assert rows["s1"]["lc_win_rate"] is None
    # the other rules' controlled tables: scores and ranks, no intervals
    other = board["rules"]["reference"]["systems"]
    assert all(r["lower"] is None for r in other if not r["baseline"])
    # These answers' style is each system's own (one length pattern, lists from s2 and s4
    # only): flagged, and no controlled rank is printed, under any rule.
    assert not board["style_check"]["identified"]
    assert "list_density" in board["style_check"]["confounded"]
    assert all(r["rank"] is None for r in [*board["systems"], *other])
    lc = CliRunner().invoke(
        app, ["--work-dir", str(work.root), "leaderboard", "b1", "--replicates", "50", "--json",
              "--length-control"],
    )  # fmt: skip
    assert lc.exit_code == 0, lc.output
    by = {r["system"]: r for r in json.loads(lc.output)["boards"][0]["systems"]}
    assert (
        by["base"]["lc_win_rate"] == 50 and by["s1"]["lc_win_rate"] > 50 > by["s5"]["lc_win_rate"]
    )
    for row in by.values():
        assert row["lc_lower"] <= row["lc_win_rate"] <= row["lc_upper"]
    shown = CliRunner().invoke(
        app, ["--work-dir", str(work.root), "leaderboard", "b1", "--replicates", "50",
              "--style-control", "--length-control"],
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert "LC win %" in shown.output and "read at equal style" in shown.output
    flat = " ".join(shown.output.split())
    assert flat.count("style control not identified") == 1
    assert "controlled ranks not identified" in flat


def test_what_stopping_policies_do_to_the_ranks(ranked: tuple[WorkDir, dict[str, Any]]) -> None:
    _, result = ranked
    (board,) = result["boards"]
    effects = {(e["design"], e["policy"]): e for e in board["stopping"]}
    full, strict = effects[("balanced", "full")], effects[("balanced", "strict")]
    nonstrict = effects[("balanced", "nonstrict")]
    assert full["savings"] == 0 and full["pairs"] == QUESTIONS * len(BEATS_BASELINE)
    assert [a["higher"] for a in full["adjacent"]] == EXPECTED[:-1]
    # strict never changes a decision: the same swap probabilities as the full reference
    for a, b in zip(full["adjacent"], strict["adjacent"], strict=True):
        assert a["p_swap"] == pytest.approx(b["p_swap"], abs=1e-12)
    assert nonstrict["savings"] > strict["savings"] > 0
    assert all(0 <= a["p_swap"] <= 0.5 for a in nonstrict["adjacent"])


def test_the_stopping_lines_fit_80_columns(ranked: tuple[WorkDir, dict[str, Any]]) -> None:
    """The leaderboard's `stopping` lines were one unwrapped line each, 113 columns wide."""
    work, _ = ranked
    shown = CliRunner().invoke(
        app, ["--work-dir", str(work.root), "leaderboard", "b1", "--replicates", "50"],
        env={"COLUMNS": "80"}, terminal_width=80,
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert max(len(line) for line in lines) <= 80, shown.output
    stopping = [line for line in lines if line.startswith("  stopping balanced · nonstrict")]
    assert stopping and "expected adjacent swaps" in " ".join(shown.output.split())


PROBE = """<script>
var section = document.getElementById('leaderboard');
var rows = section ? section.querySelectorAll('table.leaderboard tbody tr') : [];
var names = Array.prototype.map.call(rows, function (r) { return r.getAttribute('data-system'); });
var svg = section ? section.querySelector('svg') : null;
var box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
document.body.setAttribute('data-probe', JSON.stringify({
  names: names, markers: svg ? svg.querySelectorAll('circle').length : 0,
  width: box.width, height: box.height,
  linked: !!document.querySelector('nav a[href="#leaderboard"]')}));
</script>"""


def test_the_report_shows_the_leaderboard_in_a_browser(
    ranked: tuple[WorkDir, dict[str, Any]],
    chromium: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    work, _ = ranked
    page = work.run_dir("b1") / "report.html"
    probed = tmp_path / "probe.html"
    probed.write_text(page.read_text("utf-8").replace("</body>", PROBE + "</body>"), "utf-8")
    proc = subprocess.run(
        [str(chromium), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         probed.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    found = re.search(r"data-probe=\"([^\"]*)\"", proc.stdout)
    assert found, "the probe script did not run"
    probe = json.loads(found.group(1).replace("&quot;", '"'))
    assert probe["names"] == EXPECTED and probe["linked"]
    assert probe["markers"] == 6 * 3  # each system under each of the three rules
    assert probe["width"] > 300 and probe["height"] > 6 * 20


def test_the_leaderboard_is_a_prefect_artifact(ranked: tuple[WorkDir, dict[str, Any]]) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from tasks.report.artifacts import artifact_key

    key = artifact_key("b1", "leaderboard")

    async def read() -> list[Any]:
        async with get_client() as client:
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key]))
            )
        return list(found)

    (artifact,) = asyncio.run(read())
    assert artifact.type == "table"
    rows = json.loads(artifact.data) if isinstance(artifact.data, str) else artifact.data
    assert len(rows) == 6 * 3
    assert {r["system"] for r in rows if r["rank"] == 1} == {"s1"}


def test_diff_shows_each_systems_score_and_rank(ranked: tuple[WorkDir, dict[str, Any]]) -> None:
    work, result = ranked
    shown = CliRunner().invoke(app, ["--work-dir", str(work.root), "diff", "b1", "b2", "--json"])
    assert shown.exit_code == 0, shown.output
    strict = json.loads(shown.output, parse_constant=lambda c: pytest.fail(f"{c} in --json"))
    systems = strict["systems"]
    assert [s["system"] for s in sorted(systems, key=lambda s: s["rank_before"])] == EXPECTED
    scores = {r["system"]: r["score"] for r in result["boards"][0]["systems"]}
    for change in systems:  # the same calls, from the cache: the same leaderboard
        assert change["score_before"] == change["score_after"] == scores[change["system"]]
        assert change["rank_before"] == change["rank_after"]
        assert change["lc_win_rate_before"] == change["lc_win_rate_after"] is not None


def test_the_trends_page_has_each_systems_score_per_run(
    ranked: tuple[WorkDir, dict[str, Any]],
) -> None:
    work, result = ranked
    shown = CliRunner().invoke(app, ["--work-dir", str(work.root), "trends", "--page"])
    assert shown.exit_code == 0, shown.output
    page = (work.root / "trends.html").read_text("utf-8")
    board = page.split("Leaderboard of strong · default (baseline base)", 1)[1]
    rows = re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td></tr>", board)
    assert [r[0] for r in rows] == EXPECTED  # by rank in the latest run
    s1 = next(r for r in result["boards"][0]["systems"] if r["system"] == "s1")
    assert rows[0][1] == rows[0][2] == f"{s1['score']:.1f} (rank 1)"  # nights b1 and b2
