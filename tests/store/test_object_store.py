"""A work dir on an S3-compatible server (moto, on loopback): write-once files, folders
completed by the next writer, copies kept current, the run lock, call claims and a killed
writer's journal, each against the real server; two "machines" are two scratch dirs."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import stage_demo_plan

from schemas.calls import AttemptRecord, ReplyRecord
from tasks.errors import InputError
from tasks.ingest.manifest import list_manifests
from tasks.judging.cache import compact, read_replies, write_replies
from tasks.judging.claims import Claim, RunLock, run_lock_is_free
from tasks.judging.sharing import call_claims
from tasks.judging.writer import CacheWriter
from tasks.plan import read_plan
from tasks.runs.folder import RunFolder
from tasks.storage import write_parquet_atomic
from tasks.store.leases import LEASE_ENV
from tasks.store.objects import PATIENCE_ENV, ObjectStore
from tasks.store.workdir import WorkDir
from tests.store.conftest import S3Server
from tests.store.link import Link

REPO = Path(__file__).resolve().parents[2]


def reply(key: str) -> ReplyRecord:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    return ReplyRecord(call_key=key, provider="openai", model="m", latency_ms=12.5,
                       raw_reply=f"verdict for {key}: [[A>B]]", received_at=at,
                       finish_reason="stop", prompt_tokens=10, completion_tokens=3)  # fmt: skip


def attempt(key: str, ok: bool = True) -> AttemptRecord:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    return AttemptRecord(call_key=key, run_id="r", attempt=1, ok=ok, latency_ms=1.0,
                         started_at=at, error_category=None if ok else "server_error")  # fmt: skip


def _other(bucket_url: str, tmp_path: Path, name: str = "other") -> WorkDir:
    """The same store seen from another machine: a scratch dir of its own."""
    return WorkDir.at(bucket_url, scratch=tmp_path / name)


def test_the_store_is_the_work_dir_and_the_copy_lives_in_the_scratch_dir(
    store_work: WorkDir, bucket_url: str, tmp_path: Path
) -> None:
    assert store_work.address == bucket_url and store_work.url == bucket_url
    assert store_work.root.is_relative_to(tmp_path / "scratch")
    assert store_work.warehouse.parent == store_work.local != store_work.root
    # A flow handed the copy's path finds the store again.
    assert WorkDir.at(str(store_work.root)).url == bucket_url
    assert store_work.location(store_work.root / "runs" / "r" / "report.html") == (
        f"{bucket_url}/runs/r/report.html"
    )


def test_a_write_once_file_is_created_once_and_read_through_another_copy(
    store_work: WorkDir, bucket_url: str, tmp_path: Path
) -> None:
    other = _other(bucket_url, tmp_path)
    ours, theirs = pa.table({"x": [1]}), pa.table({"x": [2]})
    assert write_parquet_atomic(ours, store_work.replies / "same.parquet")
    assert not write_parquet_atomic(theirs, other.replies / "same.parquet")  # If-None-Match
    other.store.refresh(other.replies, force=True)
    assert pq.read_table(other.replies / "same.parquet").equals(ours)
    assert not list(other.replies.glob(".*.tmp"))


def test_a_replaced_file_and_a_deleted_one_reach_the_other_copy(
    store_work: WorkDir, bucket_url: str, tmp_path: Path
) -> None:
    other = _other(bucket_url, tmp_path)
    path = RunFolder(store_work, "r").create().calls
    write_parquet_atomic(pa.table({"x": [1]}), path, overwrite=True)
    assert pq.read_table(RunFolder(other, "r").calls).column("x").to_pylist() == [1]
    write_parquet_atomic(pa.table({"x": [1, 2]}), path, overwrite=True)  # same second
    other.store.refresh(other.root / "runs" / "r", force=True)
    assert pq.read_table(RunFolder(other, "r").calls).column("x").to_pylist() == [1, 2]

    write_replies(store_work, [reply("a")])
    write_replies(store_work, [reply("b")])
    assert set(read_replies(other).column("call_key").to_pylist()) == {"a", "b"}
    assert compact(store_work) == (2, 2)
    other.store.refresh(other.replies, force=True)
    assert len(list(other.replies.glob("*.parquet"))) == 1
    assert set(read_replies(other).column("call_key").to_pylist()) == {"a", "b"}


@pytest.mark.slow
def test_manifests_and_plans_are_read_from_a_fresh_scratch_dir(
    store_work: WorkDir, bucket_url: str, tmp_path: Path
) -> None:
    staged = stage_demo_plan(store_work, pairs=4, k=2)
    other = _other(bucket_url, tmp_path)
    info, table = read_plan(other, staged.plan_id)
    assert table.num_rows == 4 * 2 * 2 and info.plan_id == staged.plan_id
    assert [m.manifest_hash for m in list_manifests(other)] == [info.manifest_hash]


@pytest.mark.slow
def test_a_folder_whose_writer_died_between_its_puts_is_completed_by_the_next(
    store_work: WorkDir, bucket_url: str, tmp_path: Path
) -> None:
    staged = stage_demo_plan(store_work, pairs=4, k=2)
    info, _ = read_plan(store_work, staged.plan_id)
    sidecar = f"manifests/{info.manifest_hash}/manifest.json"
    store_work.store.delete(sidecar)  # type: ignore[attr-defined]
    other = _other(bucket_url, tmp_path)
    assert list_manifests(other) == []  # unfinished: not listed
    restaged = stage_demo_plan(other, pairs=4, k=2)  # the next writer completes it
    assert restaged.plan_id == staged.plan_id
    assert [m.manifest_hash for m in list_manifests(_other(bucket_url, tmp_path, "third"))] == [
        info.manifest_hash
    ]


def test_the_run_lock_refuses_a_live_holder_and_is_taken_from_a_dead_one(
    store_work: WorkDir, bucket_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LEASE_ENV, "1")
    holder = RunLock(store_work, "r").acquire()
    other = _other(bucket_url, tmp_path)
    with pytest.raises(InputError, match=rf"pid {os.getpid()} on .*runs/r/\.lock"):
        RunLock(other, "r").acquire()
    assert not run_lock_is_free(other, "r")
    holder.release()
    assert run_lock_is_free(other, "r")
    with RunLock(other, "r"):
        assert not run_lock_is_free(store_work, "r")

    # A holder that stops renewing (dies) loses the lock once its lease runs out.
    dying = RunLock(store_work, "d").acquire()
    assert dying._object is not None
    dying._object.lease._stop.set()
    time.sleep(1.3)
    assert run_lock_is_free(other, "d")
    with RunLock(other, "d"):
        pass


def test_claims_on_the_store_are_exclusive_and_end_as_markers(
    store_work: WorkDir, bucket_url: str, tmp_path: Path
) -> None:
    write_replies(store_work, [reply("old")])
    first, second = call_claims(store_work), call_claims(_other(bucket_url, tmp_path))
    assert second.take("old") is Claim.STORED  # stored before any claim
    assert first.take("k") is Claim.MINE and first.take("f") is Claim.MINE
    assert second.take("k") is Claim.BUSY and second.waited == {"k"}
    assert second.take("other") is Claim.MINE  # one claim blocks one call only
    path = write_replies(store_work, [reply("k")])
    first.published(path, ["k"], {"k", "f"})  # k stored, f failed for good
    first.close()  # waits for the markers
    # The view of `second` predates the reply: the marker makes it look again.
    assert second.take("k") is Claim.STORED
    assert second.take("f") is Claim.MINE  # failed: another process may send it
    second.close()


@pytest.mark.slow
def test_a_killed_writers_journaled_reply_is_published_and_its_claims_expire(
    store_work: WorkDir, bucket_url: str, tmp_path: Path
) -> None:
    survivor = call_claims(_other(bucket_url, tmp_path))
    code = textwrap.dedent(
        f"""
        import asyncio, datetime as dt, os, signal, sys, time
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(REPO / "tests")!r}]
        from test_object_store import reply, attempt
        from tasks.judging.writer import CacheWriter
        from tasks.judging.sharing import call_claims
        from tasks.store.workdir import WorkDir

        async def main():
            work = WorkDir.at({bucket_url!r}, scratch={str(tmp_path / "child")!r})
            claims = call_claims(work)
            writer = CacheWriter(work, max_rows=1000, max_age_s=3600, claims=claims)
            for key in ("received", "in-flight"):
                assert claims.take(key).value == "mine"
            writer.add(reply("received"), [attempt("received")])
            await asyncio.sleep(0)
            while not writer.journal.mirror.store.list_objects("cache/journal/"):
                time.sleep(0.02)
            print("journaled", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    )
    env = {**os.environ, LEASE_ENV: "2"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == -signal.SIGKILL and "journaled" in done.stdout, done.stderr
    assert survivor.take("received") is Claim.BUSY  # its lease still runs
    deadline = time.monotonic() + 10
    while (state := survivor.take("received")) is Claim.BUSY:
        assert time.monotonic() < deadline, "a dead writer's claim never expired"
        time.sleep(0.2)
    # The reply the dead process received is published before the claim is decided...
    assert state is Claim.STORED
    assert read_replies(store_work).column("raw_reply").to_pylist() == [reply("received").raw_reply]
    # ... and the call it had in flight is this process's to send.
    assert survivor.take("in-flight") is Claim.MINE
    survivor.close()


def test_a_cache_writer_on_the_store_publishes_and_clears_its_journal(
    store_work: WorkDir, bucket_url: str, tmp_path: Path
) -> None:
    import asyncio

    async def scenario() -> None:
        claims = call_claims(store_work)
        async with CacheWriter(store_work, claims=claims) as writer:
            for key in ("a", "b"):
                assert await claims.claim(key) is Claim.MINE
                writer.add(reply(key), [attempt(key)])
        claims.close()

    asyncio.run(scenario())
    store = store_work.store
    assert store.list_objects("cache/journal/") == []  # type: ignore[attr-defined]
    assert store.list_objects("leases/") == []  # type: ignore[attr-defined]
    other = _other(bucket_url, tmp_path)
    assert sorted(read_replies(other).column("call_key").to_pylist()) == ["a", "b"]
    late = call_claims(other)
    assert late.take("a") is Claim.STORED
    late.close()


@pytest.mark.slow
def test_a_store_that_refuses_is_one_paragraph_naming_it(s3_server: object) -> None:
    url = "s3://no-such-bucket-here/judgeline"
    judgeline = str(REPO / ".venv" / "bin" / "judgeline")
    env = {k: v for k, v in os.environ.items() if k != "JUDGELINE_WORK_DIR"}
    listed = subprocess.run([judgeline, "--work-dir", url, "runs"], env=env,
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert listed.returncode == 2, listed.stdout + listed.stderr
    assert "Traceback" not in listed.stderr
    assert listed.stderr.startswith(f"error: object store {url}: listing runs/ failed")
    assert "The bucket does not exist" in listed.stderr and "create it" in listed.stderr


def test_a_write_whose_answer_was_lost_is_retried_and_a_claim_stays_mine(
    s3_server: S3Server, bucket_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link resets a connection after the request reached the store: obstore does not
    retry such a write (it may have landed), and a run on a link that blinked stopped at once
    saying the store 'did not answer for 60 s'. Each write is retried within the patience;
    a create or a conditional write whose first try landed finds its own object."""
    link = Link(s3_server.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", link.endpoint)
    monkeypatch.setenv(PATIENCE_ENV, "30")
    work = WorkDir.at(bucket_url, scratch=tmp_path / "scratch")
    store = work.store
    assert isinstance(store, ObjectStore)
    assert store.create("probe", b"first answer") is not None  # the store has answered
    for write in (
        lambda: store.create("made", b"x"),
        lambda: store.replace("made", b"y"),
        lambda: store.delete("made"),
    ):
        link.drop_requests(2)
        started = time.monotonic()
        write()
        assert time.monotonic() - started < 10
    assert store.read("made") is None
    claims = call_claims(work)
    link.drop_requests(1)  # the claim is created, its answer lost, the retry refused
    assert claims.take("k") is Claim.MINE
    found = store.read("cache/claims/k")
    assert found is not None and claims.claimant.encode() in found.data
    claims.close()
    link.cut()
