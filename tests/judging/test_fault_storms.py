"""Fault storms against the judge stage: 429s, 5xx, stalls, bad bodies; then rerun-failed."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import StagedPlan, copy_stored_plans, stage_demo_plan

from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer
from tasks.judging.cache import read_attempts, stored_keys
from tasks.store.workdir import WorkDir

PERSONA = Persona(name="steady", skill=0.85, left_bias=0.1, tie_rate=0.05, latency_ms=60)
NO_FAULTS: dict[str, Any] = {
    "rate_429": 0.0, "rate_5xx": 0.0, "rate_stall": 0.0, "rate_malformed": 0.0,
    "rate_truncated": 0.0, "max_faults_per_request": None, "retry_after_s": 1,
}  # fmt: skip


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer([PERSONA]) as srv:
        yield srv


@pytest.fixture(scope="module")
def _stored_plan(tmp_path_factory: pytest.TempPathFactory) -> StagedPlan:
    """20 demo pairs and their full K = 2 grid (80 presentations), stored once."""
    return stage_demo_plan(WorkDir(tmp_path_factory.mktemp("storms") / "work"), pairs=20, k=2)


@pytest.fixture
def staged(_stored_plan: StagedPlan, work: WorkDir) -> tuple[WorkDir, str]:
    """The stored plan in a fresh work dir: every test starts with an empty cache."""
    return _stored_plan.copy_to(work).work, _stored_plan.plan_id


def _judge(server: SimJudgeServer, configs: int = 1, **kw: Any) -> JudgeSpec:
    spec: dict[str, Any] = {
        "name": "steady-judge",
        "base_url": server.base_url,
        "simulated": True,
        "model": "steady",
        "max_concurrency": 8,
        "configs": [
            {"name": f"c{i}", "extra": {"reasoning_effort": e}}
            for i, e in enumerate(["low", "high"][:configs])
        ],
    }
    spec.update(kw)
    return JudgeSpec.model_validate(spec)


def _judge_run(work: WorkDir, plan_id: str, run_id: str, judge: JudgeSpec) -> dict[str, Any]:
    from flows.stageflows import judge_flow

    return asyncio.run(
        judge_flow(run_id=run_id, plan_id=plan_id, judges=[judge], work_dir=str(work.root))
    )


def _rerun(work: WorkDir, run_id: str) -> dict[str, Any]:
    from flows.stageflows import rerun_failed_flow

    return asyncio.run(rerun_failed_flow(run_id=run_id, work_dir=str(work.root)))


def _calls(work: WorkDir, run_id: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(work.run_dir(run_id) / "calls.parquet").to_pylist()
    return rows


def _first_requests_per_second(log: list[dict[str, Any]], n: int) -> float:
    """Request rate over the first `n` requests (all first attempts while a queue waits)."""
    ends = sorted(dt.datetime.fromisoformat(e["time"]) for e in log)[:n]
    starts = sorted(
        dt.datetime.fromisoformat(e["time"]) - dt.timedelta(milliseconds=e["latency_ms"])
        for e in log
    )[:n]
    return n / (ends[-1] - starts[0]).total_seconds()


def _check_ended_and_rerun(
    server: SimJudgeServer, work: WorkDir, run_id: str, expected: set[str]
) -> dict[str, str]:
    """Every call stored or failed with a category in `expected`; faults off, rerun-failed
    sends exactly the failed calls and completes the run; no stored call is sent again."""
    calls = _calls(work, run_id)
    assert {c["status"] for c in calls} <= {"stored", "failed"}, "a call was left pending"
    failed = {c["call_key"]: c["error_category"] for c in calls if c["status"] == "failed"}
    assert failed, "the storm failed no call: it tests nothing"
    assert set(failed.values()) <= expected, set(failed.values())
    stored = stored_keys(work)
    assert stored & set(failed) == set()
    assert {c["call_key"] for c in calls} == stored | set(failed)

    server.set_faults(**NO_FAULTS)
    before = len(server.request_log())
    counts = _rerun(work, run_id)
    assert counts["sent_now"] == len(failed) and counts["failed"] == 0
    assert counts["stored"] == counts["planned"] == len(calls)
    late = server.request_log()[before:]
    # A faulted request of the first run can reach the log after it gave up on it (a cut body
    # is logged when the server finishes sending it): the rerun's own requests are the ones
    # answered without a fault, and none of them is for a call already stored.
    rerun = [e for e in late if e["fault"] is None]
    assert sorted(e["call_key"] for e in rerun) == sorted(failed)
    assert not {e["call_key"] for e in late} & stored
    assert {c["status"] for c in _calls(work, run_id)} == {"stored"}

    succeeded: set[str] = set()
    for entry in server.request_log():
        assert entry["call_key"] not in succeeded, f"stored call sent again: {entry}"
        if entry["status"] == 200 and entry["fault"] is None:
            succeeded.add(entry["call_key"])
    # Every failure is kept in the attempts log next to the later success.
    attempts = read_attempts(work).to_pylist()
    for key, category in failed.items():
        tried = [a for a in attempts if a["call_key"] == key]
        assert any(a["error_category"] == category for a in tried)
        assert sum(a["ok"] for a in tried) == 1
    return failed


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_429_storm_slows_the_client_and_rerun_failed_completes(
    server: SimJudgeServer, staged: tuple[WorkDir, str]
) -> None:
    work, plan_id = staged
    planned = 160
    server.set_faults(**NO_FAULTS)
    server.clear_log()
    calm = _judge_run(work, plan_id, "calm", _judge(server, configs=2, max_retries=2))
    assert calm["stored"] == planned
    calm_rate = _first_requests_per_second(server.request_log(), planned)

    # The same calls in a fresh work dir (empty cache), half of the requests throttled.
    other = WorkDir(work.root.parent / "storm")
    copy_stored_plans(work, other)
    server.set_faults(rate_429=0.5, retry_after_s=1)
    server.clear_log()
    counts = _judge_run(other, plan_id, "storm", _judge(server, configs=2, max_retries=2))
    log = server.request_log()
    assert counts["planned"] == planned and counts["pending"] == 0
    assert sum(e["status"] == 429 for e in log) > planned / 3
    storm_rate = _first_requests_per_second(log, planned)
    # With all 160 calls queued, a client that ignored the 429s would keep 8 requests in
    # flight; backing off must at least halve the request rate.
    assert storm_rate < 0.5 * calm_rate, (storm_rate, calm_rate)
    # Retry-After is a floor: no call came back sooner than the server asked.
    by_key: dict[str, list[dict[str, Any]]] = {}
    for entry in log:
        by_key.setdefault(entry["call_key"], []).append(entry)
    for entries in by_key.values():
        for prev, nxt in zip(entries, entries[1:], strict=False):
            if prev["status"] == 429:
                gap = dt.datetime.fromisoformat(nxt["time"]) - dt.datetime.fromisoformat(
                    prev["time"]
                )
                assert gap.total_seconds() >= 1.0, (prev, nxt)

    failed = _check_ended_and_rerun(server, other, "storm", {"rate_limited"})
    assert counts["failed_by_category"] == {"rate_limited": len(failed)}


STORMS: dict[str, tuple[dict[str, Any], set[str]]] = {
    "5xx-burst": ({"rate_5xx": 0.6}, {"server_error"}),
    "stalls": ({"rate_stall": 0.3, "stall_s": 3.0}, {"timeout"}),
    "malformed": ({"rate_malformed": 0.5}, {"malformed_response"}),
    "truncated": ({"rate_truncated": 0.5}, {"malformed_response", "transport"}),
    "mixed": (
        {
            "rate_429": 0.15,
            "rate_5xx": 0.15,
            "rate_stall": 0.1,
            "stall_s": 3.0,
            "rate_malformed": 0.15,
            "rate_truncated": 0.15,
            "retry_after_s": 0,
        },
        {"rate_limited", "server_error", "timeout", "malformed_response", "transport"},
    ),  # fmt: skip
}


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("storm", list(STORMS))
def test_storm_ends_with_every_call_stored_or_failed_then_rerun_completes(
    server: SimJudgeServer, staged: tuple[WorkDir, str], storm: str
) -> None:
    work, plan_id = staged
    faults, expected = STORMS[storm]
    server.set_faults(**{**NO_FAULTS, **faults})
    server.clear_log()
    judge = _judge(server, max_retries=1, timeout_s=0.5)
    counts = _judge_run(work, plan_id, storm, judge)
    assert counts["planned"] == 80 and counts["pending"] == 0
    assert counts["stored"] + counts["failed"] == 80
    failed = _check_ended_and_rerun(server, work, storm, expected)
    assert sum(counts["failed_by_category"].values()) == len(failed)
    if storm == "mixed":
        assert len(set(failed.values())) >= 3, failed


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_replies_cut_by_the_token_limit_are_stored_once_and_never_sent_again(
    staged: tuple[WorkDir, str],
) -> None:
    from scripted_judge import Answer, ScriptedJudge, openai_reply

    work, plan_id = staged
    with ScriptedJudge() as judge:
        judge.fallback = lambda _: Answer(200, openai_reply(None, "length"))
        spec = JudgeSpec(name="cut", base_url=judge.base_url, model="m", max_retries=4)
        counts = _judge_run(work, plan_id, "cut", spec)
        assert counts["stored"] == counts["planned"] == 80 and counts["failed"] == 0
        assert len(judge.log) == 80  # one request per call: no re-sending a paid reply
        again = _judge_run(work, plan_id, "cut", spec)
        assert again["sent_now"] == 0 and len(judge.log) == 80
