"""The reply journal (a killed writer loses no reply it received) and call claims (two
processes never send one call at once), each against real processes killed by SIGKILL."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from schemas.calls import ReplyRecord
from tasks.judging.cache import (
    fold_dead_journals,
    read_attempts,
    read_replies,
    recover,
    stored_keys,
    write_replies,
)
from tasks.judging.claims import CallClaims, Claim, StoredKeyView
from tasks.judging.writer import CacheWriter
from tasks.store.workdir import WorkDir

REPO = Path(__file__).resolve().parents[2]

RECORDS = """
import datetime as dt
from schemas.calls import AttemptRecord, ReplyRecord

def reply(key):
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    return ReplyRecord(call_key=key, provider="openai", model="m", latency_ms=12.5,
                       raw_reply=f"verdict for {key}: [[A>B]]\\r\\n  é ", received_at=at,
                       finish_reason="stop", prompt_tokens=10, completion_tokens=3)

def attempt(key, n=1, ok=True):
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    return AttemptRecord(call_key=key, run_id="r", attempt=n, ok=ok, latency_ms=1.0,
                         started_at=at, error_category=None if ok else "server_error")
"""
namespace: dict[str, object] = {}
exec(RECORDS, namespace)
reply = namespace["reply"]
attempt = namespace["attempt"]


def _die_in_child(work: WorkDir, body: str) -> str:
    """Run `body` (an async function's body; `work` is bound) in a new process that
    SIGKILLs itself at the end; returns what it printed."""
    code = RECORDS + textwrap.dedent(
        """
        import asyncio, os, signal
        from pathlib import Path
        from tasks.judging.writer import CacheWriter
        from tasks.judging.claims import CallClaims
        from tasks.store.workdir import WorkDir
        work = WorkDir(Path({root!r}))

        async def main():
        {body}
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
        """
    ).format(root=str(work.root), body=textwrap.indent(textwrap.dedent(body), "    "))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    return done.stdout


def _rows(work: WorkDir) -> dict[str, ReplyRecord]:
    return {r["call_key"]: ReplyRecord.model_validate(r) for r in read_replies(work).to_pylist()}


# --- the journal ------------------------------------------------------------------------


def test_replies_of_a_killed_writer_are_read_as_they_are_and_published_by_the_next_judge_stage(
    work: WorkDir,
) -> None:
    printed = _die_in_child(
        work,
        """
        writer = CacheWriter(work, max_rows=1000, max_age_s=3600)
        keys = [f"k{i:02d}" for i in range(25)]
        for key in keys:
            writer.add(reply(key), [attempt(key, 1, ok=False), attempt(key, 2)])
        writer.add(None, [attempt("failed", 1, ok=False)])
        await asyncio.sleep(0)  # one turn of the loop: the outcomes are journaled
        print(",".join(keys), flush=True)
        """,
    )
    keys = printed.strip().split(",")
    # Nothing was flushed: the 25 replies exist only in the dead process's journal.
    assert list(work.replies.glob("*.parquet")) == []
    assert len(list(work.journal.glob("*.jsonl"))) == 1

    journal = {p: p.stat().st_mtime_ns for p in work.journal.iterdir()}
    for _ in range(2):  # a reader sees them, and writes nothing
        assert _rows(work) == {k: reply(k) for k in keys}  # byte for byte, timestamps too
        attempts = read_attempts(work)
        assert attempts.num_rows == 51
        assert sorted(attempts.column("ok").to_pylist()).count(False) == 26
        assert stored_keys(work) == set(keys)
        assert list(work.replies.glob("*.parquet")) == []
        assert {p: p.stat().st_mtime_ns for p in work.journal.iterdir()} == journal
    assert recover(work) == 25  # the next judge stage publishes them
    assert list(work.journal.iterdir()) == []  # published, then deleted
    assert _rows(work) == {k: reply(k) for k in keys} and read_attempts(work).num_rows == 51


def test_a_live_writers_journal_is_left_to_it(work: WorkDir) -> None:
    async def scenario() -> None:
        writer = CacheWriter(work, max_rows=1000, max_age_s=3600)
        writer.add(reply("mine"), [attempt("mine")])
        await asyncio.sleep(0)
        assert fold_dead_journals(work) == 0 and recover(work) == 0
        assert stored_keys(work) == set()
        assert len(list(work.journal.glob("*.jsonl"))) == 1
        await writer.close()
        assert stored_keys(work) == {"mine"}
        assert list(work.journal.iterdir()) == []

    asyncio.run(scenario())


def test_a_torn_journal_line_is_skipped_and_named(
    work: WorkDir, caplog: pytest.LogCaptureFixture
) -> None:
    good = json.dumps(
        {
            "reply": reply("ok").model_dump(mode="json"),
            "attempts": [attempt("ok").model_dump(mode="json")],
        }
    )
    torn = json.dumps({"reply": reply("torn").model_dump(mode="json"), "attempts": []})[:40]
    path = work.journal / "0123abcd.jsonl"
    path.write_text(good + "\n" + torn, "utf-8")
    with caplog.at_level(logging.WARNING, logger="tasks.judging.journal"):
        assert fold_dead_journals(work) == 1
    assert "0123abcd.jsonl" in caplog.text and "lines [2]" in caplog.text
    assert _rows(work) == {"ok": reply("ok")}
    assert not path.exists()


def test_recover_clears_old_temporary_files_only(work: WorkDir) -> None:
    old = work.replies / ".x.parquet.old.tmp"
    young = work.replies / ".y.parquet.young.tmp"
    for tmp in (old, young):
        tmp.write_bytes(b"partial")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    recover(work)
    assert not old.exists() and young.exists()


# --- claims -----------------------------------------------------------------------------


def test_a_claim_is_exclusive_until_released(work: WorkDir) -> None:
    first, second = CallClaims(work), CallClaims(work)
    assert first.take("k") is Claim.MINE and first.take("k") is Claim.MINE
    assert second.take("k") is Claim.BUSY and second.waited == {"k"}
    assert second.take("other") is Claim.MINE  # one claim blocks one call only
    first.release(["k"])
    assert second.take("k") is Claim.MINE and first.take("k") is Claim.BUSY
    second.close()
    assert second.held == 0 and first.take("k") is Claim.MINE
    first.close()


def test_a_stored_call_is_not_claimed_even_if_stored_while_it_waited(work: WorkDir) -> None:
    write_replies(work, [reply("old")])
    sender, waiter = CallClaims(work), CallClaims(work)
    assert waiter.take("old") is Claim.STORED
    assert sender.take("new") is Claim.MINE
    assert waiter.take("new") is Claim.BUSY
    write_replies(work, [reply("new")])
    sender.release(["new"])
    assert waiter.take("new") is Claim.STORED and waiter.held == 0


def test_the_writer_releases_a_claim_only_once_its_reply_is_published(work: WorkDir) -> None:
    async def scenario() -> None:
        claims, other = CallClaims(work), CallClaims(work)
        writer = CacheWriter(work, max_rows=1000, max_age_s=3600, claims=claims)
        assert claims.take("k") is Claim.MINE and claims.take("f") is Claim.MINE
        writer.add(reply("k"), [attempt("k")])
        writer.add(None, [attempt("f", ok=False)])
        # Received, journaled, not yet published: the other process must keep waiting.
        assert other.take("k") is Claim.BUSY and other.take("f") is Claim.BUSY
        await writer.flush()
        assert other.take("k") is Claim.STORED
        assert other.take("f") is Claim.MINE  # failed: the other process may try it
        await writer.close()

    asyncio.run(scenario())


def test_a_writer_s_own_reply_files_are_not_read_back_by_its_view(
    work: WorkDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer names its reply file to the claims before publishing it: a look at the
    view while the file is being published does not read it (its keys come from the
    writer), while another process's file is read as before."""
    import tasks.judging.claims as claims_module
    import tasks.judging.writer as writer_module

    read: list[str] = []
    check_schema, write = claims_module.check_schema, writer_module.write_replies

    def counted(path: Path, model: type) -> None:
        read.append(path.name)
        check_schema(path, model)

    claims = CallClaims(work)
    make_reply: Any = reply
    make_attempt: Any = attempt

    def publish_and_look(*args: object) -> Path | None:
        path = write(*args)  # type: ignore[arg-type]
        claims.view._changes._settled = False  # noqa: SLF001  (look, whatever the clock)
        assert "absent" not in claims.view  # a miss: the view lists the folder
        return path

    monkeypatch.setattr(claims_module, "check_schema", counted)
    monkeypatch.setattr(writer_module, "write_replies", publish_and_look)

    async def scenario() -> None:
        writer = CacheWriter(work, max_rows=1000, max_age_s=3600, claims=claims)
        assert claims.take("a") is Claim.MINE
        writer.add(make_reply("a"), [make_attempt("a")])
        await writer.flush()
        assert "a" in claims.view and read == []
        other = write(work, [make_reply("other")])
        assert other is not None and claims.take("other") is Claim.STORED
        assert read == [other.name]
        await writer.close()

    asyncio.run(scenario())
    claims.close()


def test_a_dead_holders_claims_are_free_after_its_journal_is_published(work: WorkDir) -> None:
    survivor = CallClaims(work)  # its view of the stored keys predates the death
    _die_in_child(
        work,
        """
        claims = CallClaims(work)
        writer = CacheWriter(work, max_rows=1000, max_age_s=3600, claims=claims)
        for key in ("received", "in-flight"):
            assert claims.take(key).value == "mine"
        writer.add(reply("received"), [attempt("received")])
        await asyncio.sleep(0)
        """,
    )
    assert list(work.replies.glob("*.parquet")) == []
    # The reply the dead process received is published before the claim is decided...
    assert survivor.take("received") is Claim.STORED
    assert _rows(work) == {"received": reply("received")}
    # ... and the call it had in flight is this process's to send.
    assert survivor.take("in-flight") is Claim.MINE


def test_stored_key_view_sees_every_publication_at_once_and_lists_only_then(
    work: WorkDir,
) -> None:
    write_replies(work, [reply("old")])
    view = StoredKeyView(work)
    assert "old" in view and "new" not in view
    (work.replies / "broken.parquet").write_bytes(b"PAR1 cut short")  # left to the readers
    # Publications closer together than one tick of the file system's clock leave the
    # folder's mtime unchanged: the view must still see each one at once.
    for i in range(40):
        write_replies(work, [reply(f"burst{i}")])
        assert f"burst{i}" in view
    listings = 0
    real = view.refresh

    def counted() -> int:
        nonlocal listings
        listings += 1
        return real()

    view.refresh = counted  # type: ignore[method-assign]
    time.sleep(0.1)
    assert "absent" not in view  # may list once: the folder just settled
    listings = 0
    assert all("absent" not in view for _ in range(100))
    assert listings == 0  # a quiet, settled folder is not listed again
    write_replies(work, [reply("later")])
    assert "later" in view and listings == 1


def test_claims_that_cannot_read_the_cache_hold_no_file(
    work: WorkDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived process (a Dask worker) whose claims could not be made (no room to
    publish a dead writer's journal) keeps no file of the work dir open."""
    import errno

    import psutil

    import tasks.judging.claims as claims

    def full(work: WorkDir) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(claims, "StoredKeyView", full)
    work.journal.mkdir(parents=True, exist_ok=True)
    with pytest.raises(OSError, match="No space left"):
        CallClaims(work)
    held = [f.path for f in psutil.Process().open_files()]
    assert not [p for p in held if p.startswith(str(work.root))], held
