"""The judge stage on a local Dask cluster: two worker processes, one shared cache."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from support import NO_FAULTS, StagedPlan, stage_demo_plan

from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from simjudge.server import SimJudgeServer
from tasks.errors import InputError, IntegrityError
from tasks.judging.cache import read_attempts, read_replies, stored_keys
from tasks.judging.planned import PlannedCall, plan_calls
from tasks.store.workdir import WorkDir

KEY = "sk-judgeline-daskkey-41c7e09b2d"
KEY_ENV = "JUDGELINE_DASK_TEST_KEY"
TEMPLATE = "arena-hard-v1"


@pytest.fixture(scope="module")
def _stored_plan(tmp_path_factory: pytest.TempPathFactory) -> StagedPlan:
    """30 demo pairs, full grid, K = 2: 120 presentations."""
    return stage_demo_plan(WorkDir(tmp_path_factory.mktemp("dask-staged") / "work"), pairs=30, k=2)


@pytest.fixture(scope="module")
def server() -> Iterator[SimJudgeServer]:
    with SimJudgeServer(api_key=KEY) as srv:
        yield srv


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """Two single-threaded worker processes; they get the key variable at spawn time."""
    from distributed import LocalCluster

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, KEY)
        with LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
        ) as local:
            yield local


@pytest.fixture(autouse=True)
def _key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def _no_faults(server: SimJudgeServer) -> None:
    server.set_faults(**NO_FAULTS, max_faults_per_request=None)


def _judge(server: SimJudgeServer, **kw: Any) -> JudgeSpec:
    base: dict[str, Any] = {
        "name": "strong-judge",
        "base_url": server.base_url,
        "simulated": True,
        "model": "strong",
        "api_key_env": KEY_ENV,
        "max_concurrency": 8,
        "configs": [
            ReasoningConfig(name="low", extra={"reasoning_effort": "low"}),
            ReasoningConfig(name="high", extra={"reasoning_effort": "high"}),
        ],
    }
    base.update(kw)
    return JudgeSpec.model_validate(base)


def _planned(staged: StagedPlan, judge: JudgeSpec, run_id: str) -> list[PlannedCall]:
    return plan_calls(staged.manifest, staged.presentations, [judge], TEMPLATE, run_id)


def _judge_run(
    staged: StagedPlan, run_id: str, judges: list[JudgeSpec], **kw: Any
) -> dict[str, Any]:
    from flows.stageflows import judge_flow

    return asyncio.run(
        judge_flow(
            run_id=run_id,
            plan_id=staged.plan_id,
            judges=judges,
            template_id=TEMPLATE,
            work_dir=str(staged.work.root),
            **kw,
        )
    )


@contextmanager
def _placement(cluster: Any) -> Iterator[Counter[str]]:
    """Counts, by worker address, the batch tasks Dask ran inside the block."""
    from distributed import Client, get_task_stream

    placed: Counter[str] = Counter()
    with Client(cluster) as observer, get_task_stream(client=observer) as stream:
        yield placed
    placed.update(t["worker"] for t in stream.data if "judge-batch-" in str(t["key"]))


def _reply_file_keys(work: WorkDir) -> list[str]:
    """Every call key in every reply file, duplicates kept (the readers would hide them)."""
    keys: list[str] = []
    for path in work.replies.glob("*.parquet"):
        keys.extend(pq.read_table(path, columns=["call_key"]).column("call_key").to_pylist())
    return keys


# --- on the cluster ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_two_workers_store_every_call_once_and_match_a_local_run(
    _stored_plan: StagedPlan, server: SimJudgeServer, cluster: Any, tmp_path: Path
) -> None:
    _no_faults(server)
    server.clear_log()
    on_dask = _stored_plan.copy_to(WorkDir(tmp_path / "dask" / "work"))
    judge = _judge(server)
    planned = {c.call_key for c in _planned(on_dask, judge, "run-dask")}
    assert len(planned) == 240

    with _placement(cluster) as placed:
        counts = _judge_run(
            on_dask, "run-dask", [judge], batch_size=20, dask_address=cluster.scheduler_address
        )
    assert counts["sent"] == counts["stored"] == counts["planned"] == 240

    requested = Counter(e["call_key"] for e in server.request_log())
    assert set(requested) == planned  # nothing lost, nothing unplanned
    assert max(requested.values()) == 1  # no call key requested twice
    in_files = _reply_file_keys(on_dask.work)
    assert sorted(in_files) == sorted(planned)  # each stored exactly once, in some file
    assert stored_keys(on_dask.work) == planned
    attempts = read_attempts(on_dask.work)
    assert attempts.num_rows == 240 and all(attempts.column("ok").to_pylist())

    # Dask's own record of where the 12 batch tasks ran: both workers did some.
    assert sum(placed.values()) == 12
    assert set(placed) == set(cluster.scheduler_info["workers"])

    local = _stored_plan.copy_to(WorkDir(tmp_path / "local" / "work"))
    local_counts = _judge_run(local, "run-dask", [judge], batch_size=20)
    assert local_counts["stored"] == 240
    dask_calls = pq.read_table(on_dask.work.run_dir("run-dask") / "calls.parquet")
    local_calls = pq.read_table(local.work.run_dir("run-dask") / "calls.parquet")
    assert dask_calls.equals(local_calls)
    # The simulated judge is deterministic: the same keys got the same reply bytes.
    columns = ["call_key", "raw_reply"]
    assert (
        read_replies(on_dask.work).select(columns).equals(read_replies(local.work).select(columns))
    )

    # A second run on the cluster finds everything cached and sends nothing.
    again = _judge_run(
        on_dask, "run-dask", [judge], batch_size=20, dask_address=cluster.scheduler_address
    )
    assert again["sent_now"] == 0 and again["stored"] == 240
    assert sum(requested.values()) + 240 == len(server.request_log())  # only the local run


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_flow_with_a_dask_task_runner_reruns_exactly_the_failed_calls(
    _stored_plan: StagedPlan, server: SimJudgeServer, cluster: Any, tmp_path: Path
) -> None:
    from prefect_dask import DaskTaskRunner

    from flows.stageflows import rerun_failed_flow

    staged = _stored_plan.copy_to(WorkDir(tmp_path / "work"))
    judge = _judge(server, name="noisy-judge", model="noisy", max_retries=0)
    server.set_faults(rate_5xx=0.3, max_faults_per_request=1)
    runner = DaskTaskRunner(address=cluster.scheduler_address)
    first = _judge_run(staged, "run-faulty", [judge], batch_size=40)
    assert first["failed"] > 0 and first["stored"] + first["failed"] == 240
    failed = {
        r["call_key"]
        for r in pq.read_table(staged.work.run_dir("run-faulty") / "calls.parquet").to_pylist()
        if r["status"] == "failed"
    }
    assert len(failed) == first["failed"]

    _no_faults(server)
    server.clear_log()
    on_dask = rerun_failed_flow.with_options(task_runner=runner)  # type: ignore[arg-type]
    with _placement(cluster) as placed:
        counts = asyncio.run(on_dask(run_id="run-faulty", work_dir=str(staged.work.root)))
    assert sum(placed.values()) == 1  # the rerun's one batch ran on the cluster
    assert counts["sent_now"] == len(failed) and counts["stored"] == 240
    assert counts["failed"] == 0 and counts["sent"] == 240
    requested = Counter(e["call_key"] for e in server.request_log())
    assert set(requested) == failed and max(requested.values()) == 1
    assert Counter(_reply_file_keys(staged.work)).most_common(1)[0][1] == 1


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_worker_error_reaches_the_flow_as_the_same_error(
    _stored_plan: StagedPlan,
    server: SimJudgeServer,
    cluster: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    staged = _stored_plan.copy_to(WorkDir(tmp_path / "work"))
    # Set in the flow's process only: the workers were spawned before, and the key is
    # resolved on the worker.
    monkeypatch.setenv("JUDGELINE_DASK_UNSET_KEY", KEY)
    judge = _judge(server, api_key_env="JUDGELINE_DASK_UNSET_KEY")
    with pytest.raises(InputError, match="JUDGELINE_DASK_UNSET_KEY is not set"):
        _judge_run(staged, "run-nokey", [judge], dask_address=cluster.scheduler_address)
    assert stored_keys(staged.work) == set()


def _cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from flows.cli import app

    return CliRunner().invoke(app, list(args))


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_cli_judge_with_dask_address(
    _stored_plan: StagedPlan, server: SimJudgeServer, cluster: Any, tmp_path: Path
) -> None:
    _no_faults(server)
    server.clear_log()
    staged = _stored_plan.copy_to(WorkDir(tmp_path / "work"))
    with _placement(cluster) as placed:
        result = _cli(
            "--work-dir", str(staged.work.root), "judge", staged.plan_id[:12],
            "--base-url", server.base_url, "--model", "left-biased", "--api-key-env", KEY_ENV,
            "--simulated",
            "--batch-size", "30", "--no-progress", "--dask-address", cluster.scheduler_address,
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sum(placed.values()) == 4
    assert "120 planned calls" in result.output and "stored 120, failed 0" in result.output
    requested = Counter(e["call_key"] for e in server.request_log())
    assert len(requested) == 120 and max(requested.values()) == 1
    assert len(_reply_file_keys(staged.work)) == 120


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_an_unreachable_scheduler_is_an_input_error(
    _stored_plan: StagedPlan,
    server: SimJudgeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import flows.dask as judge_dask
    from simjudge.server import bind_loopback

    monkeypatch.setattr(judge_dask, "CONNECT_TIMEOUT_S", 2)
    staged = _stored_plan.copy_to(WorkDir(tmp_path / "work"))
    sock = bind_loopback()  # bound, never listening: connections are refused
    address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
    try:
        result = _cli(
            "--work-dir", str(staged.work.root), "judge", staged.plan_id,
            "--base-url", server.base_url, "--model", "strong", "--api-key-env", KEY_ENV,
            "--no-progress", "--dask-address", address,
        )  # fmt: skip
    finally:
        sock.close()
    assert isinstance(result.exception, InputError), result.output
    assert f"no Dask scheduler reachable at '{address}'" in str(result.exception)
    assert stored_keys(staged.work) == set()


# --- a batch's own logic (no cluster) ----------------------------------------------------


def _batch(staged: StagedPlan, calls: list[PlannedCall], **kw: Any) -> Any:
    from tasks.judging.dask_batches import RemoteBatch

    args: dict[str, Any] = {
        "work_root": str(staged.work.root),
        "run_id": "r",
        "plan_id": staged.plan_id,
        "template_id": TEMPLATE,
        "spec": calls[0].judge,
        "index": 0,
        "share": 1,
        "calls": calls,
    }
    args.update(kw)
    return RemoteBatch(**args)


def test_a_batch_rebuilds_its_calls_from_the_work_dir(_stored_plan: StagedPlan) -> None:
    from tasks.judging.dask_batches import rebuild_calls

    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="m")
    planned = _planned(_stored_plan, judge, "r")
    chosen = planned[7:30:3]
    rebuilt = rebuild_calls(_batch(_stored_plan, chosen))
    assert [c.call_key for c in rebuilt] == [c.call_key for c in chosen]
    assert [c.messages for c in rebuilt] == [c.messages for c in chosen]

    other = judge.model_copy(update={"model": "another-model"})  # other keys
    with pytest.raises(IntegrityError, match=r"batch j#0 .* 8 of 8 call keys do not follow"):
        rebuild_calls(_batch(_stored_plan, chosen, spec=other))


def test_a_batch_on_a_machine_without_the_work_dir_says_so(
    _stored_plan: StagedPlan, tmp_path: Path
) -> None:
    from tasks.judging.dask_batches import judge_batch_remote

    judge = JudgeSpec(name="j", base_url="http://127.0.0.1:1/v1", model="m")
    batch = _batch(_stored_plan, _planned(_stored_plan, judge, "r")[:3])
    batch.work_root = str(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="every worker must see the flow's work directory"):
        asyncio.run(judge_batch_remote(batch))


def test_a_batch_does_not_send_calls_another_run_stored_meanwhile(
    _stored_plan: StagedPlan, server: SimJudgeServer, tmp_path: Path
) -> None:
    import datetime as dt

    from schemas.calls import ReplyRecord
    from tasks.judging.cache import write_replies
    from tasks.judging.dask_batches import judge_batch_remote

    _no_faults(server)
    server.clear_log()
    staged = _stored_plan.copy_to(WorkDir(tmp_path / "work"))
    calls = _planned(staged, _judge(server), "r")[:10]
    # Stored by "another run" after the flow planned this batch, before it ran.
    write_replies(
        staged.work,
        [
            ReplyRecord(
                call_key=c.call_key,
                provider="openai",
                model="strong",
                raw_reply="[[A]]",
                latency_ms=1.0,
                received_at=dt.datetime.now(dt.UTC),
            )  # fmt: skip
            for c in calls[:3]
        ],
    )
    result = asyncio.run(judge_batch_remote(_batch(staged, calls)))
    assert result["counts"] == {"stored": 7, "skipped": 3}
    assert result["worker"].endswith(f"/{os.getpid()}")
    requested = [e["call_key"] for e in server.request_log()]
    assert sorted(requested) == sorted(c.call_key for c in calls[3:])
    assert sorted(_reply_file_keys(staged.work)) == sorted(c.call_key for c in calls)


def test_a_judges_limits_are_shared_across_concurrent_batches(_stored_plan: StagedPlan) -> None:
    judge = JudgeSpec(
        name="j", base_url="http://127.0.0.1:1/v1", model="m", max_concurrency=8,
        requests_per_minute=600,
    )  # fmt: skip
    calls = _planned(_stored_plan, judge, "r")[:2]
    spec = _batch(_stored_plan, calls, share=3).client_spec()
    assert (spec.max_concurrency, spec.requests_per_minute) == (2, 200)
    assert _batch(_stored_plan, calls, share=16).client_spec().max_concurrency == 1
    unlimited = judge.model_copy(update={"requests_per_minute": None})
    assert (
        _batch(_stored_plan, calls, spec=unlimited, share=4).client_spec().requests_per_minute
        is None
    )


def test_a_run_configuration_may_name_a_dask_scheduler() -> None:
    from pydantic import ValidationError

    from schemas.config import RunConfig

    base: dict[str, Any] = {
        "datasets": [{"kind": "demo"}],
        "judges": [{"name": "j", "base_url": "http://127.0.0.1:1/v1", "model": "m"}],
    }
    plain = RunConfig.model_validate(base)
    # Unset, it stays out of the dump: existing configurations keep their config hash.
    assert plain.dask_address is None and "dask_address" not in plain.model_dump()
    on_dask = RunConfig.model_validate({**base, "dask_address": "tcp://10.0.0.5:8786"})
    assert on_dask.dask_address == "tcp://10.0.0.5:8786"
    # The run record keeps the dump; rerun-failed reads the address back from it.
    assert RunConfig.model_validate(on_dask.model_dump(mode="json")) == on_dask
    with pytest.raises(ValidationError, match="dask_address"):
        RunConfig.model_validate({**base, "dask_address": ""})


def test_a_remote_batch_counts_into_the_runs_tally() -> None:
    from tasks.judging.tally import Tally

    tally = Tally(total=10, cached=0, show=False)
    tally.record_batch({"stored": 2, "skipped": 3, "failed_timeout": 1})
    assert (tally.sent, tally.stored, tally.skipped) == (3, 2, 3)
    assert dict(tally.failed) == {"timeout": 1}
