"""Tokens and money a run spent, per judge config: the calls it sent, priced when known.

A call counts as sent by a run when the attempts log holds a successful attempt of that
run at its key; every other stored call of the run came from the cache and costs nothing
(`cached_calls`). Prices are the judges' as recorded in the run's `run.json`
(`tasks.judging.prices.price_of`).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from schemas.cost import Price, SpendRow
from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.judging.cache import read_attempts, read_replies
from tasks.judging.prices import price_of
from tasks.runs.folder import RunFolder
from tasks.storage import read_parquet
from tasks.store.workdir import WorkDir

__all__ = ["reply_usd", "run_prices", "run_spend", "sent_keys"]


def reply_usd(price: Price, reply: dict[str, Any], *, prompt_cache: bool = True) -> float:
    """What one stored reply (a ReplyRecord row) cost: its tokens at `price`, cache reads and
    writes at their own rates, at the batch discount when it came back from a provider batch
    (`sent_in_batch`); missing counts are 0. `prompt_cache=False`: what the same tokens
    would have cost with no prompt cache (every prompt token at the input price)."""
    cache = {
        "cached_tokens": reply.get("cached_prompt_tokens") or 0,
        "cache_write_tokens": reply.get("cache_write_tokens") or 0,
        "cache_write_1h_tokens": reply.get("cache_write_1h_tokens") or 0,
    }
    return price.usd(
        reply.get("prompt_tokens") or 0,
        reply.get("completion_tokens") or 0,
        reasoning_tokens=reply.get("reasoning_tokens") or 0,
        batch=bool(reply.get("sent_in_batch")),
        **(cache if prompt_cache else {}),
    )


def run_prices(work: WorkDir, run_id: str) -> dict[str, Price | None]:
    """Each judge's price by name, from the run's `run.json`; an imported judge has none
    (nothing was paid for its replies)."""
    info = RunFolder(work, run_id).find_info()
    judges = [] if info is None else info.judges
    return {
        j["name"]: None if j.get("imported") else price_of(JudgeSpec.model_validate(j))
        for j in judges
    }


def sent_keys(work: WorkDir, run_id: str, attempts: pa.Table | None = None) -> set[str]:
    """Call keys this run sent and got a reply for, from the attempts log (read here unless
    given: a caller over many runs reads it once)."""
    attempts = read_attempts(work) if attempts is None else attempts
    mine = attempts.filter(
        pc.and_(pc.equal(attempts.column("run_id"), run_id), attempts.column("ok"))
    )
    return set(mine.column("call_key").to_pylist())


def run_spend(work: WorkDir, run_id: str, attempts: pa.Table | None = None) -> list[SpendRow]:
    """Per (judge, config) of a run: sent and cached calls, their tokens and USD (`attempts`:
    the attempts log, if the caller has read it)."""
    path = RunFolder(work, run_id).calls
    if not path.is_file():
        raise InputError(f"run {run_id!r} has no calls table: {path} does not exist")
    calls = read_parquet(path, ["judge", "config", "call_key", "status"]).to_pylist()
    sent = sent_keys(work, run_id, attempts)
    replies = {
        r["call_key"]: r
        for r in read_replies(work, sent & {c["call_key"] for c in calls}).to_pylist()
    }
    prices = run_prices(work, run_id)
    groups: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(
        lambda: {"sent": set(), "cached": set()}
    )
    for c in calls:
        if c["status"] != "stored":
            continue
        kind = "sent" if c["call_key"] in replies else "cached"
        groups[(c["judge"], c["config"])][kind].add(c["call_key"])
    rows = []
    for (judge, config), keys in groups.items():
        mine = [replies[k] for k in sorted(keys["sent"])]
        price = prices.get(judge)
        usd = saved = None
        if price is not None:
            usd = sum(reply_usd(price, r) for r in mine)
            saved = sum(reply_usd(price, r, prompt_cache=False) for r in mine) - usd
        rows.append(
            SpendRow(
                judge=judge,
                config=config,
                sent_calls=len(mine),
                cached_calls=len(keys["cached"]),
                prompt_tokens=sum(r["prompt_tokens"] or 0 for r in mine),
                cached_prompt_tokens=sum(r["cached_prompt_tokens"] or 0 for r in mine),
                cache_write_tokens=sum(r["cache_write_tokens"] or 0 for r in mine),
                completion_tokens=sum(r["completion_tokens"] or 0 for r in mine),
                reasoning_tokens=sum(r["reasoning_tokens"] or 0 for r in mine),
                usd=usd,
                prompt_cache_saved_usd=saved,
                price_as_of=None if price is None else price.as_of,
            )
        )
    return rows
