"""The content-addressed cache: call keys, reply files, quarantine, compaction, writers."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import multiprocessing
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from schemas.arrow import rows_to_table
from schemas.calls import AttemptRecord, ReplyRecord
from schemas.decoding import ReasoningConfig
from schemas.judge import JudgeSpec
from tasks.hashing import canonical_json, sha256_text
from tasks.judging import cache, callkey, writer
from tasks.judging.cache import (
    compact,
    read_attempts,
    read_replies,
    stored_keys,
    write_attempts,
    write_replies,
)
from tasks.judging.callkey import CallKeyer, call_key, messages_sha256
from tasks.judging.writer import CacheWriter
from tasks.store.workdir import WorkDir

MESSAGES = ({"role": "system", "content": "judge"}, {"role": "user", "content": "Q? L | R"})
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _spec(**kw: object) -> JudgeSpec:
    base: dict[str, object] = {"name": "j", "base_url": "http://127.0.0.1:1/v1", "model": "m"}
    base.update(kw)
    return JudgeSpec.model_validate(base)


def _key(spec: JudgeSpec | None = None, config: ReasoningConfig | None = None, **kw: object) -> str:
    args: dict[str, object] = {
        "seed": 0,
        "repeat": 0,
        "template_id": "t",
        "template_hash": "h",
        "messages": MESSAGES,
    }
    args.update(kw)
    return call_key(
        spec or _spec(),
        config or ReasoningConfig(name="default"),
        **args,  # type: ignore[arg-type]
    )


def _reply(key: str, text: str = "[[A>B]]", at: dt.datetime = T0) -> ReplyRecord:
    return ReplyRecord(
        call_key=key, provider="openai", model="m", raw_reply=text, latency_ms=1.0, received_at=at
    )


def test_call_key_covers_what_decides_the_reply_only() -> None:
    base = _key()
    assert len(base) == 64 and base == _key()
    changed = {
        "model": _key(_spec(model="m2")),
        "provider": _key(_spec(provider="anthropic")),
        "temperature": _key(_spec(temperature=0.7)),
        "top_p": _key(_spec(top_p=0.9)),
        "max_tokens": _key(_spec(max_tokens=10)),
        "extra": _key(_spec(extra={"reasoning_effort": "low"})),
        "config extra": _key(config=ReasoningConfig(name="default", extra={"x": 1})),
        "seed": _key(seed=1),
        "repeat": _key(repeat=1),
        "template id": _key(template_id="t2"),
        "template hash": _key(template_hash="h2"),
        "messages": _key(messages=({"role": "user", "content": "Q? R | L"},)),
    }
    for what, key in changed.items():
        assert key != base, what
    assert len(set(changed.values())) == len(changed)
    same = {
        "timeout": _key(_spec(timeout_s=3)),
        "concurrency": _key(_spec(max_concurrency=99)),
        "rate": _key(_spec(requests_per_minute=10)),
        "retries": _key(_spec(max_retries=0)),
        "base url": _key(_spec(base_url="https://other.example/v1")),
        "key env": _key(_spec(api_key_env="SOME_KEY")),
        "judge name": _key(_spec(name="other")),
        "config name": _key(config=ReasoningConfig(name="renamed")),
    }
    for what, key in same.items():
        assert key == base, what


def test_call_key_is_the_digest_of_its_documented_parts() -> None:
    spec = _spec(top_p=0.5, extra={"a": [1, "é"]})
    config = ReasoningConfig(name="c", extra={"reasoning_effort": "high"})
    params = {
        "temperature": 0.0,
        "max_tokens": 1024,
        "seed": 3,
        "top_p": 0.5,
        "a": [1, "é"],
        "reasoning_effort": "high",
    }
    parts = [callkey.CALL_KEY_FORMAT, "openai", "m", params, 2, "t", "h", messages_sha256(MESSAGES)]
    expected = sha256_text(canonical_json(parts))
    assert _key(spec, config, seed=3, repeat=2) == expected
    keyer = CallKeyer(spec, config)
    for _ in range(2):  # memoised parts give the same key
        got = keyer.key(
            seed=3, repeat=2, template_id="t", template_hash="h",
            messages_digest=messages_sha256(MESSAGES),
        )  # fmt: skip
        assert got == expected


def test_replies_round_trip_filter_and_keep_earliest(work: WorkDir) -> None:
    write_replies(work, [_reply("k1", "first", T0), _reply("k2")])
    later = T0 + dt.timedelta(seconds=5)
    write_replies(work, [_reply("k1", "second", later), _reply("k3")])
    table = read_replies(work)
    rows = {r["call_key"]: r["raw_reply"] for r in table.to_pylist()}
    assert rows == {"k1": "first", "k2": "[[A>B]]", "k3": "[[A>B]]"}
    assert read_replies(work, ["k3", "nope"]).column("call_key").to_pylist() == ["k3"]
    assert stored_keys(work) == {"k1", "k2", "k3"}
    # Readable as one table by DuckDB too.
    pattern = str(work.replies / "*.parquet")
    query = "select count(distinct call_key) from read_parquet(?)"
    n = duckdb.connect().execute(query, [pattern]).fetchall()
    assert n == [(3,)]


def test_empty_cache_reads_empty_tables(work: WorkDir) -> None:
    assert read_replies(work).num_rows == 0
    assert read_attempts(work).num_rows == 0
    assert stored_keys(work) == set()
    assert write_replies(work, []) is None


def test_corrupt_file_is_quarantined_and_others_read(
    work: WorkDir, caplog: pytest.LogCaptureFixture
) -> None:
    write_replies(work, [_reply("good")])
    bad = write_replies(work, [_reply("lost")])
    assert bad is not None
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])  # truncated mid-file
    (work.replies / "junk.parquet").write_bytes(b"not parquet at all")
    with caplog.at_level(logging.WARNING, logger="tasks.judging.cache"):
        assert stored_keys(work) == {"good"}
    assert not bad.exists()
    moved = sorted(p.name for p in work.quarantine.iterdir())
    assert moved == sorted([f"replies-{bad.name}", "replies-junk.parquet"])
    assert any("moved to" in r.getMessage() and bad.name in r.getMessage() for r in caplog.records)
    assert read_replies(work).column("call_key").to_pylist() == ["good"]


def test_wrong_schema_file_is_quarantined(work: WorkDir) -> None:
    import pyarrow as pa

    pq.write_table(pa.table({"call_key": ["x"], "other": [1]}), work.replies / "odd.parquet")
    write_replies(work, [_reply("ok")])
    assert read_replies(work).column("call_key").to_pylist() == ["ok"]
    assert (work.quarantine / "replies-odd.parquet").exists()


def test_a_file_remap_cannot_read_is_not_counted_as_stored(work: WorkDir) -> None:
    """A reply file missing a column is quarantined by `stored_keys` itself, so the judge
    stage sends its calls again instead of counting them stored and remap finding none."""
    write_replies(work, [_reply("ok")])
    short = rows_to_table([_reply("lost")], ReplyRecord).drop_columns(["model"])
    pq.write_table(short, work.replies / "short.parquet")
    assert stored_keys(work) == {"ok"}
    assert (work.quarantine / "replies-short.parquet").exists()
    assert set(read_replies(work).column("call_key").to_pylist()) == stored_keys(work)


def test_a_reply_without_text_is_not_stored(
    work: WorkDir, caplog: pytest.LogCaptureFixture
) -> None:
    """A reply file whose raw_reply values are null passed as stored (`stored_keys` read
    its call_key column only), then remap quarantined it: its calls had no reply and were
    never sent again. Rows lacking a required value are left out by every reader alike;
    the file's other rows still count."""
    import pyarrow as pa

    write_replies(work, [_reply("ok")])
    table = rows_to_table([_reply("empty-1"), _reply("fine"), _reply("empty-2")], ReplyRecord)
    index = table.schema.get_field_index("raw_reply")
    text = pa.array([None, "[[A>B]]", None], pa.string())
    table = table.set_column(index, pa.field("raw_reply", pa.string()), text)
    pq.write_table(table, work.replies / "nulls.parquet")
    with caplog.at_level(logging.WARNING, logger="tasks.judging.cache"):
        assert stored_keys(work) == {"ok", "fine"}
    assert set(read_replies(work).column("call_key").to_pylist()) == {"ok", "fine"}
    assert not any(work.quarantine.iterdir())
    assert any(
        "nulls.parquet" in r.getMessage() and "2 rows" in r.getMessage() for r in caplog.records
    )


def test_compact_merges_and_drops_duplicates(work: WorkDir) -> None:
    for i in range(5):
        write_replies(work, [_reply(f"k{i}"), _reply("dup", at=T0 + dt.timedelta(seconds=i))])
    assert len(list(work.replies.glob("*.parquet"))) == 5
    before = read_replies(work)
    merged, rows = compact(work)
    assert (merged, rows) == (5, 6)
    files = list(work.replies.glob("*.parquet"))
    assert len(files) == 1
    assert pq.read_table(files[0]).num_rows == 6
    after = read_replies(work)
    assert after.sort_by("call_key").equals(before.sort_by("call_key"))
    assert compact(work) == (0, 6)


def _write_many(root: str, worker: int) -> None:
    w = WorkDir(Path(root))
    for i in range(20):
        write_replies(w, [_reply(f"w{worker}-{i}-{j}") for j in range(10)])


def test_many_processes_write_at_once(work: WorkDir) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_write_many, args=(str(work.root), n)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert len(stored_keys(work)) == 4 * 20 * 10
    assert not list(work.quarantine.iterdir())


def test_attempts_log_appends(work: WorkDir) -> None:
    rec = AttemptRecord(
        call_key="k",
        run_id="r",
        attempt=1,
        ok=False,
        error_category="timeout",
        latency_ms=5.0,
        started_at=T0,
    )
    write_attempts(work, [rec])
    write_attempts(
        work, [rec.model_copy(update={"attempt": 2, "ok": True, "error_category": None})]
    )
    table = read_attempts(work).sort_by("attempt")
    assert table.column("ok").to_pylist() == [False, True]
    assert table.column("error_category").to_pylist() == ["timeout", None]


def test_writer_flushes_by_count_by_age_and_at_close(work: WorkDir) -> None:
    async def until(count: int, limit_s: float = 10.0) -> float:
        """Seconds until the cache holds `count` keys (polling; the flush runs in a thread)."""
        started = time.monotonic()
        while len(stored_keys(work)) < count and time.monotonic() - started < limit_s:
            await asyncio.sleep(0.02)
        return time.monotonic() - started

    async def scenario() -> None:
        by_count = CacheWriter(work, max_rows=50, max_age_s=60)
        for i in range(120):
            by_count.add(_reply(f"c{i}"), [])
        waited = await until(120)
        assert len(stored_keys(work)) == 120 and waited < 10  # by count, long before age
        for _ in range(100):  # the flush task resumes after its file is out
            if not by_count._pending:
                break
            await asyncio.sleep(0.01)
        assert len(by_count._pending) == 0
        await by_count.close()
        assert len(stored_keys(work)) == 120
        assert list(work.journal.iterdir()) == []  # published lines leave the journal

        by_age = CacheWriter(work, max_rows=1000, max_age_s=0.3)
        by_age.add(_reply("late"), [])
        await asyncio.sleep(0)  # journaled within the turn of the loop
        assert len(stored_keys(work)) == 120
        assert len(list(work.journal.glob("*.jsonl"))) == 1  # journaled, held, not folded
        waited = await until(121)
        assert len(stored_keys(work)) == 121 and waited >= 0.2
        by_age.add(_reply("last"), [])
        await by_age.close()
        assert len(stored_keys(work)) == 122
        assert list(work.journal.iterdir()) == []

    asyncio.run(scenario())


def test_public_surface_is_pinned() -> None:
    # The call key and the writer moved to their own modules: together they keep it.
    assert set(cache.__all__) | set(callkey.__all__) | set(writer.__all__) == {
        "CALL_KEY_FORMAT",
        "CacheWriter",
        "CallKeyer",
        "PublishListener",
        "call_key",
        "call_key_from_digest",
        "check_schema",
        "compact",
        "fold_dead_journals",
        "kept_keys",
        "decoding_params",
        "messages_sha256",
        "read_attempts",
        "read_replies",
        "recover",
        "stored_keys",
        "write_attempts",
        "write_replies",
    }


def test_call_key_of_a_reasoning_judge_is_the_digest_of_its_documented_parts() -> None:
    spec = _spec(reasoning=True, seed=None, system_role="developer", headers={"X-Title": "t"})
    config = ReasoningConfig(name="c", reasoning_effort="high", max_tokens=2000)
    params = {
        "max_completion_tokens": 2000,
        "reasoning_effort": "high",
        "unsent_seed": 3,
        "system_role": "developer",
    }
    parts = [callkey.CALL_KEY_FORMAT, "openai", "m", params, 2, "t", "h", messages_sha256(MESSAGES)]
    assert _key(spec, config, seed=3, repeat=2) == sha256_text(canonical_json(parts))
    claude = _spec(provider="anthropic", anthropic_beta=["b"], timeout_s=5)
    params = {"temperature": 0.0, "max_tokens": 1024, "seed": 3, "anthropic-beta": ["b"]}
    parts = [callkey.CALL_KEY_FORMAT, "anthropic", "m", params, 2, "t", "h"]
    parts.append(messages_sha256(MESSAGES))
    assert _key(claude, seed=3, repeat=2) == sha256_text(canonical_json(parts))
