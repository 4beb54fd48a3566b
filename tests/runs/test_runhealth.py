"""Run status from per-config health: calls without a reply, too few valid outcomes, a
breaker stop, no valid outcome,
and reasons that lead with the status and name the provider's message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from schemas import CallRecord, LabelRecord, OutcomeRow, rows_to_table
from schemas.judge import JudgeSpec
from schemas.run import ConfigHealth, RunInfo
from tasks.runs.folder import RunFolder
from tasks.runs.health import (
    MISSING_SHARE,
    NOT_RECORDED,
    VALID_SHARE,
    RunNotCompleted,
    raise_unless_completed,
    reasons,
    run_health,
    run_status,
)
from tasks.store.workdir import WorkDir

TRIP = {"judge": "j", "config": "c", "category": "auth", "http_status": 401,
        "message": "Incorrect API key provided", "failures": 3, "held": 37}  # fmt: skip


def _health(valid: int, planned: int = 100, **kw: Any) -> ConfigHealth:
    return ConfigHealth(judge="j", config="c", planned=planned, valid=valid, **kw)


def test_status_by_missing_and_valid_share_and_breaker() -> None:
    assert (MISSING_SHARE, VALID_SHARE) == (0.1, 0.5)
    assert run_status([_health(90, failed={"timeout": 10}), _health(100)]) == "completed"
    assert run_status([_health(89, failed={"timeout": 11}), _health(100)]) == "degraded"
    assert run_status([_health(89, failed={"auth": 3}, pending=8), _health(100)]) == "degraded"
    # Invalid or abstained replies are the judge's behaviour: a noisy judge still completes,
    # a judge with fewer than half its slots valid does not.
    assert run_status([_health(84), _health(100)]) == "completed"
    assert run_status([_health(49), _health(100)]) == "degraded"
    assert run_status([_health(95, stopped=TRIP), _health(100)]) == "degraded"
    assert run_status([_health(0), _health(0)]) == "failed"
    assert run_status([]) == "failed"  # nothing planned, nothing measured


def test_reasons_lead_with_the_status_and_quote_the_provider() -> None:
    short = _health(60, failed={"rate_limited": 30}, pending=10, message="Slow down")
    stopped = _health(0, failed={"auth": 3}, pending=97, message=TRIP["message"], stopped=TRIP)
    lines = reasons("r1", "degraded", [_health(100), short, stopped])
    assert lines[0] == (
        "run r1 degraded: 2 of 3 judge configs got no reply to more than 10% of their calls, "
        "have fewer than 50% valid outcomes, or were stopped"
    )
    assert lines[1] == (
        "j · c: 60/100 valid outcomes; failed: 30 rate_limited; first: Slow down; "
        "`judgeline rerun-failed r1` sends them again"
    )
    assert lines[2] == (
        "j · c: 0/100 valid outcomes; stopped after 3 auth failures in a row (HTTP 401): "
        "Incorrect API key provided; 97 calls not sent, run `judgeline rerun-failed r1` after "
        "fixing the key"
    )
    assert reasons("r1", "completed", [_health(100)]) == []
    imported = _health(80, failed={NOT_RECORDED: 20})
    assert reasons("imp", "degraded", [imported])[1] == (
        "j · c: 80/100 valid outcomes; 20 not_recorded: the imported files hold no reply for "
        "them, so nothing can send them again; import files that have them"
    )
    with pytest.raises(RunNotCompleted) as caught:
        raise_unless_completed("r1", "failed", [stopped])
    assert caught.value.status == "failed" and "no judge config produced" in str(caught.value)


def _cut_run(folder: RunFolder, cut: int, planned: int = 8) -> None:
    """A run of one judge config with `max_tokens: 64` whose first `cut` replies were cut by
    the token limit (Invalid, noted `truncated`) and the others valid."""
    from tasks.prompts.parsing import parse_reply

    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:9/v1", model="m", max_tokens=64)
    calls, labels, outcomes = [], [], []
    for i in range(planned):
        key = f"key-{i}"
        calls.append({
            "run_id": folder.run_id, "judge": "j", "config": "default", "dataset": "d",
            "presentation_id": f"p{i}", "call_key": key, "provider": "openai", "model": "m",
            "template_id": "arena-hard-v1", "template_hash": "h", "seed": 0,
            "left_sha256": "l", "right_sha256": "r", "status": "stored",
        })  # fmt: skip
        parsed = parse_reply("arena-hard-v1", "[[A>B]]", "length" if i < cut else "stop")
        labels.append({"call_key": key, "template_id": "arena-hard-v1", "parser_version": "1",
                       "label": parsed.label, "note": parsed.note})  # fmt: skip
        outcomes.append({
            "judge": "j", "config": "default", "dataset": "d", "pair_id": f"p{i}", "seed": 0,
            "order": "AB", "outcome": "I" if i < cut else "A", "presentation_id": f"p{i}",
            "call_key": key, "label": parsed.label,
        })  # fmt: skip
    folder.create()
    pq.write_table(rows_to_table(calls, CallRecord), folder.calls)
    pq.write_table(rows_to_table(labels, LabelRecord), folder.table("labels"))
    pq.write_table(rows_to_table(outcomes, OutcomeRow), folder.outcomes)
    folder.write_info(
        RunInfo(plan_id="p", manifest_hash="m", judges=[judge.model_dump(mode="json")])
    )


def test_replies_cut_by_the_token_limit_are_named_with_the_limit(work: WorkDir) -> None:
    folder = RunFolder(work, "cut")
    _cut_run(folder, cut=8)
    [health] = run_health(folder)
    assert (health.valid, health.truncated, health.max_tokens) == (0, 8, 64)
    lead, line = reasons("cut", run_status([health]), [health])
    assert lead.startswith("run cut failed")
    assert line == (
        "j · default: 0/8 valid outcomes; 8 replies cut by the token limit (max_tokens 64): "
        "raise the config's max_tokens and run again (a new limit makes new calls)"
    )
    # A few cut replies of a config that is short for another reason are named too.
    folder = RunFolder(work, "some")
    _cut_run(folder, cut=5)
    [health] = run_health(folder)
    assert reasons("some", run_status([health]), [health])[1] == (
        "j · default: 3/8 valid outcomes; 5 replies cut by the token limit (max_tokens 64): "
        "raise the config's max_tokens and run again (a new limit makes new calls)"
    )


@pytest.mark.slow
def test_a_config_with_no_valid_outcome_shows_nothing_in_the_policy_columns(
    tmp_path: Path,
) -> None:
    """An imported run (K = 2) whose judge recorded no reply: the summary's score cell says
    there is no valid outcome, and the policy columns (calls saved / decisions changed) are
    empty, not 0%/0.0%."""
    from typer.testing import CliRunner

    from flows.cli import app
    from tasks.imports import build_import, import_config, read_imported
    from tasks.remap import remap_run, write_remap
    from tasks.replay.stream import replay_file
    from tasks.runs.jobs import new_record, settle_status
    from tasks.runs.record import write_record
    from tests.imports.test_judgebench import NAME, _line

    work = WorkDir(tmp_path / "work")
    paths = []
    for seed in range(2):
        (tmp_path / str(seed)).mkdir()
        lines = [_line(f"p{i}", "A>B", None, None) for i in range(4)]
        # Two runs of the judge, recorded apart: the same lines, written differently.
        text = "".join(json.dumps(x, sort_keys=seed == 1) + "\n" for x in lines)
        paths.append(tmp_path / str(seed) / NAME)
        paths[-1].write_text(text, "utf-8")
    files = [read_imported("judgebench", p) for p in paths]
    record = new_record("none", "bench", import_config("judgebench", paths, files))
    built = build_import(work, files, "none")
    write_remap(work, remap_run(work, "none"))
    folder = RunFolder(work, "none")
    replay_file(folder.outcomes, folder.path)
    record.manifest_hash, record.plan_id, record.calls = built.manifest_hash, built.plan_id, {}
    settle_status(work, record)
    write_record(work, record)
    result = CliRunner().invoke(
        app, ["--work-dir", str(work.root), "show", "none"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    # The summary table comes first (the agreement table below it names the config too).
    row = next(line for line in result.output.splitlines() if "judge-x · arena_hard  " in line)
    assert "no valid outcome" in row and "%" not in row, row
