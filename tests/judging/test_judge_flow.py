"""The judge stage end to end: planned calls, the Prefect flow, rerun-failed, key hygiene."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import NO_FAULTS, StagedPlan, stage_demo_plan
from typer.testing import CliRunner

from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.errors import InputError, IntegrityError
from tasks.hashing import sha256_text
from tasks.judging.cache import read_attempts, read_replies, stored_keys
from tasks.judging.planned import call_records, plan_calls
from tasks.store.workdir import WorkDir

KEY = "sk-judgeline-flowkey-7e21c9d04b"
FAULT_KINDS = {"rate_limited", "server_error", "timeout", "malformed_response"}


@pytest.fixture(scope="module")
def _stored_plan(tmp_path_factory: pytest.TempPathFactory) -> StagedPlan:
    """A stored manifest of 10 demo pairs and its full-grid plan with K = 2 (40 slots)."""
    return stage_demo_plan(WorkDir(tmp_path_factory.mktemp("staged") / "work"), pairs=10, k=2)


@pytest.fixture
def staged(_stored_plan: StagedPlan, work: WorkDir) -> StagedPlan:
    """The stored plan copied into a fresh work dir (an empty cache per test)."""
    return _stored_plan.copy_to(work)


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGELINE_TEST_KEY", KEY)


def _judge(server: SimJudgeServer, **kw: Any) -> JudgeSpec:
    base: dict[str, Any] = {
        "name": "strong-judge",
        "base_url": server.base_url,
        "simulated": True,
        "model": "strong",
        "api_key_env": "JUDGELINE_TEST_KEY",
        "max_concurrency": 8,
    }
    base.update(kw)
    return JudgeSpec.model_validate(base)


def _no_faults(server: SimJudgeServer) -> None:
    server.set_faults(**NO_FAULTS, max_faults_per_request=None)


def _run(staged: StagedPlan, run_id: str, judges: list[JudgeSpec], **kw: Any) -> dict[str, Any]:
    from flows.stageflows import judge_flow

    return asyncio.run(
        judge_flow(
            run_id=run_id,
            plan_id=staged.plan_id,
            judges=judges,
            work_dir=str(staged.work.root),
            **kw,
        )
    )


def _calls(staged: StagedPlan, run_id: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(
        staged.work.run_dir(run_id) / "calls.parquet"
    ).to_pylist()
    return rows


# --- planning (no Prefect) ---------------------------------------------------------------


def test_plan_calls_follow_the_trusted_map(staged: StagedPlan) -> None:
    configs = [ReasoningConfig(name="default"), ReasoningConfig(name="hi", extra={"x": 1})]
    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="m", configs=configs)
    planned = plan_calls(staged.manifest, staged.presentations, [judge], "arena-hard-v1", "r")
    assert len(planned) == staged.presentations.num_rows * 2
    assert len({c.call_key for c in planned}) == len(planned)
    answers = {r["pair_id"]: r for r in staged.manifest.to_pylist()}
    slots = {r["presentation_id"]: r for r in staged.presentations.to_pylist()}
    for call in planned:
        p = slots[call.presentation_id]
        pair = answers[p["pair_id"]]
        text = {"A": pair["answer_a"], "B": pair["answer_b"]}
        assert call.left_sha256 == sha256_text(text[p["left_identity"]])
        assert call.right_sha256 == sha256_text(text[p["right_identity"]])
        user = call.messages[-1]["content"]
        assert user.index(text[p["left_identity"]]) < user.rindex(text[p["right_identity"]])
        assert call.seed == p["seed"] and call.dataset == pair["dataset"]


def test_plan_calls_reject_a_map_without_one_a_and_one_b(staged: StagedPlan) -> None:
    rows = staged.presentations.to_pylist()
    rows[3]["right_identity"] = rows[3]["left_identity"]
    bad = pa.Table.from_pylist(rows, schema=staged.presentations.schema)
    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="m")
    with pytest.raises(IntegrityError, match=rows[3]["presentation_id"]):
        plan_calls(staged.manifest, bad, [judge], "arena-hard-v1", "r")


def test_call_records_status_from_cache_and_attempts(staged: StagedPlan) -> None:
    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="m")
    planned = plan_calls(staged.manifest, staged.presentations, [judge], "arena-hard-v1", "r")
    keys = [c.call_key for c in planned]
    table = call_records(planned, {keys[0]}, {keys[1]: "timeout"})
    rows = table.to_pylist()
    assert (rows[0]["status"], rows[0]["error_category"]) == ("stored", None)
    assert (rows[1]["status"], rows[1]["error_category"]) == ("failed", "timeout")
    assert {r["status"] for r in rows[2:]} == {"pending"}
    assert "left_identity" not in table.column_names


# --- the flow ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_full_grid_run_then_cached_rerun_sends_nothing(
    staged: StagedPlan, server: SimJudgeServer
) -> None:
    _no_faults(server)
    server.clear_log()
    configs = [
        ReasoningConfig(name="default"),
        ReasoningConfig(name="high", extra={"reasoning_effort": "high"}),
    ]
    judge = _judge(server, configs=configs)
    counts = _run(staged, "run-grid", [judge], batch_size=15)
    planned = staged.presentations.num_rows * 2
    assert counts["planned"] == planned and counts["stored"] == planned
    assert counts["sent"] == planned and counts["failed"] == counts["pending"] == 0
    log = server.request_log()
    assert len(log) == planned and len({e["call_key"] for e in log}) == planned
    calls = _calls(staged, "run-grid")
    assert {c["status"] for c in calls} == {"stored"}
    assert {c["config"] for c in calls} == {"default", "high"}
    replies = read_replies(staged.work, [c["call_key"] for c in calls])
    assert replies.num_rows == planned
    info = json.loads((staged.work.run_dir("run-grid") / "run.json").read_text())
    assert info["plan_id"] == staged.plan_id and info["judges"][0]["model"] == "strong"

    # Rebuilt from the cache: nothing is sent again, and the run keeps what it sent before
    # (it used to be recorded as `sent 0`, all `cached`).
    again = _run(staged, "run-grid", [judge])
    assert again["sent_now"] == 0 and again["stored"] == planned
    assert again["sent"] == planned and again["cached"] == 0
    assert (
        json.loads((staged.work.run_dir("run-grid") / "run.json").read_text())["counts"]["sent"]
        == planned
    )
    assert len(server.request_log()) == planned  # not one request more
    # Another run id with the same judge settings shares the cache too.
    other = _run(staged, "run-grid-2", [judge.model_copy(update={"name": "renamed"})])
    assert other["sent"] == other["sent_now"] == 0 and other["cached"] == planned
    assert len(server.request_log()) == planned

    with pytest.raises(IntegrityError, match="different judges"):
        _run(staged, "run-grid", [_judge(server, model="noisy")])


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_faulty_run_then_rerun_failed_completes_without_resending(
    staged: StagedPlan, server: SimJudgeServer
) -> None:
    server.set_faults(
        rate_429=0.06, rate_5xx=0.06, rate_stall=0.06, rate_malformed=0.06, rate_truncated=0.06,
        stall_s=3, max_faults_per_request=1,
    )  # fmt: skip
    server.clear_log()
    judge = _judge(server, model="left-biased", max_retries=0, timeout_s=0.5)
    counts = _run(staged, "run-faults", [judge], batch_size=16)
    calls = _calls(staged, "run-faults")
    failed = {c["call_key"]: c["error_category"] for c in calls if c["status"] == "failed"}
    assert {c["status"] for c in calls} <= {"stored", "failed"}
    assert counts["failed"] == len(failed) > 0 and counts["stored"] == len(calls) - len(failed)
    assert set(failed.values()) <= FAULT_KINDS and len(set(failed.values())) >= 2
    assert stored_keys(staged.work) & set(failed) == set()
    first_log = len(server.request_log())

    from flows.cli import app

    result = CliRunner().invoke(
        app, ["--work-dir", str(staged.work.root), "rerun-failed", "run-faults", "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert "failed 0" in result.output
    rerun = server.request_log()[first_log:]
    assert {e["call_key"] for e in rerun} == set(failed)  # exactly the failed calls
    assert {c["status"] for c in _calls(staged, "run-faults")} == {"stored"}

    # No call key is ever requested again once it had a stored (successful) reply.
    succeeded: set[str] = set()
    for entry in server.request_log():
        assert entry["call_key"] not in succeeded, entry
        if entry["status"] == 200 and entry["fault"] is None:
            succeeded.add(entry["call_key"])
    # The first run's failed attempts stay in the log next to the rerun's successes, and
    # the rerun numbers its attempts after them.
    attempts = read_attempts(staged.work).to_pylist()
    for key in failed:
        tries = sorted((a["started_at"], a["attempt"], a["ok"]) for a in attempts
                       if a["call_key"] == key)  # fmt: skip
        assert [(n, ok) for _, n, ok in tries] == [(1, False), (2, True)]
    _no_faults(server)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_api_key_is_never_written_or_logged(
    staged: StagedPlan, server: SimJudgeServer, capfd: pytest.CaptureFixture[str]
) -> None:
    server.set_faults(rate_5xx=0.2, rate_malformed=0.2, max_faults_per_request=1)
    judge = _judge(server, model="noisy", max_retries=0)
    wrong = _judge(server, name="wrong-key", api_key_env="JUDGELINE_WRONG_KEY")
    os.environ["JUDGELINE_WRONG_KEY"] = KEY[::-1]
    try:
        counts = _run(staged, "run-keys", [judge, wrong])
    finally:
        del os.environ["JUDGELINE_WRONG_KEY"]
    # The wrong key fails as `auth`; its breaker stops the judge after a few calls, and the
    # rest of its 40 calls stay pending for rerun-failed.
    assert counts["stored"] > 0 and counts["failed_by_category"]["auth"] >= 3
    assert counts["failed_by_category"]["auth"] + counts["pending"] == 40
    _no_faults(server)
    out, err = capfd.readouterr()
    written = [p for p in staged.work.root.rglob("*") if p.is_file()]
    homes = [p for p in Path(os.environ["PREFECT_HOME"]).rglob("*") if p.is_file()]
    assert len(written) > 5
    for secret in (KEY, KEY[::-1]):
        for path in written + homes:
            assert secret.encode() not in path.read_bytes(), path
        assert secret not in out and secret not in err


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_key_from_a_prefect_secret_block(staged: StagedPlan, server: SimJudgeServer) -> None:
    from prefect.blocks.system import Secret

    Secret(value=KEY).save("judgeline-test-key", overwrite=True)  # type: ignore[arg-type]
    _no_faults(server)
    judge = _judge(server, api_key_env=None, api_key_secret="judgeline-test-key", model="noisy")
    counts = _run(staged, "run-secret", [judge])
    assert counts["stored"] == staged.presentations.num_rows
    for path in staged.work.root.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_missing_key_variable_is_an_input_error(staged: StagedPlan, server: SimJudgeServer) -> None:
    from tasks.judging.client import resolve_api_key

    with pytest.raises(InputError, match="JUDGELINE_NOT_SET"):
        resolve_api_key(_judge(server, api_key_env="JUDGELINE_NOT_SET"))


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_cli_judge_with_quick_flags_and_judges_file(
    staged: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    from flows.cli import app

    _no_faults(server)
    runner = CliRunner()
    root = str(staged.work.root)
    args = ["--work-dir", root, "judge", staged.plan_id[:10], "--no-progress", "--run-id", "cli-1"]
    quick = [*args, "--base-url", server.base_url, "--model", "strong"]
    quick += ["--api-key-env", "JUDGELINE_TEST_KEY"]
    result = runner.invoke(app, quick)
    assert result.exit_code == 0, result.output
    assert "stored 40" in " ".join(result.output.split())

    bad = tmp_path / "judges.yaml"
    bad.write_text("judges:\n  - name: x\n    model: strong\n", "utf-8")
    result = runner.invoke(app, [*args[:-2], "--run-id", "cli-2", "--judges", str(bad)])
    assert isinstance(result.exception, InputError)
    assert "judges.yaml" in str(result.exception) and "base_url" in str(result.exception)


def test_a_refused_run_leaves_no_run_folder(staged: StagedPlan, server: SimJudgeServer) -> None:
    from tasks.judging.request import JudgeRequest
    from tasks.judging.stage import run_judge_stage

    missing = "f" * 16
    with pytest.raises(InputError, match=missing):
        request = JudgeRequest(staged.work, "refused", missing, (_judge(server),))
        asyncio.run(run_judge_stage(request))
    with pytest.raises(InputError, match="unique"):
        judges = (_judge(server), _judge(server))
        asyncio.run(run_judge_stage(JudgeRequest(staged.work, "refused", staged.plan_id, judges)))
    assert not (staged.work.runs / "refused").exists()


def test_progress_counts_only_the_wanted_calls(
    staged: StagedPlan, server: SimJudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wave of a live run (or a rerun) wants some calls of the plan: the bar's total and
    # its `cached` count those calls only, not the rest of the grid.
    from tasks.judging import stage
    from tasks.judging.planned import plan_calls
    from tasks.judging.request import JudgeRequest
    from tasks.prompts.templates import DEFAULT_TEMPLATE

    bars: list[tuple[int, int]] = []

    class Recorded(stage.Tally):
        def __init__(self, total: int, cached: int, show: bool) -> None:
            bars.append((total, cached))
            super().__init__(total, cached, show)

    monkeypatch.setattr(stage, "Tally", Recorded)
    judges = (_judge(server),)
    planned = plan_calls(
        staged.manifest, staged.presentations, list(judges), DEFAULT_TEMPLATE, "wave"
    )
    keys = sorted({c.call_key for c in planned})
    first = JudgeRequest(staged.work, "wave", staged.plan_id, judges, only_keys=frozenset(keys[:7]))
    counts = asyncio.run(stage.run_judge_stage(first))
    assert counts["sent"] == 7 and bars[-1] == (7, 0)
    # Five of these eight are stored already: the bar starts at 5 of 8, and 3 are sent.
    second = JudgeRequest(
        staged.work, "wave", staged.plan_id, judges, only_keys=frozenset(keys[2:10])
    )
    counts = asyncio.run(stage.run_judge_stage(second))
    assert counts["sent_now"] == 3 and counts["sent"] == 10 and bars[-1] == (8, 5)


def test_the_collector_is_eased_while_calls_go_out_and_restored_after(
    staged: StagedPlan, server: SimJudgeServer
) -> None:
    """While the batches send, the objects made before are frozen and the youngest
    generation's threshold is raised (`_collector_eased`); both are as before after."""
    import gc

    from tasks.judging import stage
    from tasks.judging.batches import judge_batch
    from tasks.judging.request import JudgeRequest, StageHooks

    seen: list[tuple[int, int]] = []

    async def run_batch(batch: Any, session: Any) -> dict[str, int]:
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))
        return await judge_batch(batch, session)

    before = gc.get_threshold()
    request = JudgeRequest(staged.work, "eased", staged.plan_id, (_judge(server),))
    counts = asyncio.run(stage.run_judge_stage(request, hooks=StageHooks(run_batch=run_batch)))
    assert counts["sent_now"] == 40
    assert seen and all(t == stage.SENDING_GEN0 and frozen > 0 for t, frozen in seen)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    # A process that collects less often already (the `judgeline` command) keeps its own.
    gc.set_threshold(5 * stage.SENDING_GEN0, *before[1:])
    try:
        with stage._collector_eased():
            assert gc.get_threshold()[0] == 5 * stage.SENDING_GEN0
    finally:
        gc.set_threshold(*before)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_cli_judge_whose_calls_all_time_out_fails(tmp_path: Path) -> None:
    """A judge slower than its timeout (stall 3 s, timeout 0.5 s): each of the 8 calls is
    sent twice (a timeout is retried once), and `judgeline judge` exits 4 saying why."""
    from flows.cli import app

    staged = stage_demo_plan(WorkDir(tmp_path / "work"), pairs=2, k=2)
    with SimJudgeServer(api_key=KEY) as slow:
        slow.set_faults(rate_stall=1.0, stall_s=3.0)
        judges = tmp_path / "judges.yaml"
        spec = _judge(slow, timeout_s=0.5, max_retries=4).model_dump(mode="json")
        judges.write_text(json.dumps({"judges": [spec]}), "utf-8")
        result = CliRunner().invoke(
            app,
            ["--work-dir", str(staged.work.root), "judge", staged.plan_id, "--judges",
             str(judges), "--no-progress", "--run-id", "slow"],
        )  # fmt: skip
    assert result.exit_code == 4, result.output
    attempts = read_attempts(staged.work).to_pylist()
    assert len(attempts) == 16 and {a["error_category"] for a in attempts} == {"timeout"}
    out = result.output
    assert "16 requests timed out" in out
    assert "run slow failed: no judge config produced a valid outcome" in out
    assert "failed: 8 timeout" in out and "the timeout of 0.5 s is retried once at most" in out
