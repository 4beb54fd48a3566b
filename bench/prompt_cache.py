"""Provider prompt caching: what it saves on JudgeBench, and what it costs in throughput.

Usage: python bench/prompt_cache.py [--pairs 350] [--k 4] [--calls 10000] [--latency-ms 50]

1. Money: the JudgeBench data file's pairs (the shared data folder), the full grid at K, the
   default template, against the simulated judge's OpenAI profile (chat completions) and its
   Anthropic profile (Messages), each with `prompt_cache: off` and `auto`, in fresh work
   directories. Prices: gpt-5-mini's and claude-sonnet-4-5's from the built-in table (the
   simulated judge's personas stand in for those models). Prints per run: prompt tokens,
   cached prompt tokens, cache writes, the repeats' share billed as cached, input USD (and
   its ratio to the same tokens without caching), total USD, and the estimate's input USD
   beside it. Targets: repeats >= 70% cached, input USD <= 40% of uncached (Anthropic: within 10%).
2. Throughput: `--calls` calls (answers the length of JudgeBench's) through the judge stage
   against the simulated judge in a subprocess thinking `--latency-ms`, caching off and on,
   alternated, best of two each. Target: on / off >= 0.9.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import print_table
from support import SHARED_DATA, stage_plan

from schemas import Pair
from schemas.cost import EstimateRow, Price
from schemas.judge import JudgeSpec
from simjudge.persona import Persona
from simjudge.server import SimJudgeServer, simjudge_subprocess
from tasks.ingest.loaders import load_judgebench
from tasks.judging.cache import read_replies
from tasks.judging.estimate import estimate_plan
from tasks.judging.planned import plan_calls
from tasks.judging.prices import builtin_price
from tasks.judging.request import JudgeRequest
from tasks.judging.spend import reply_usd, run_spend
from tasks.judging.stage import run_judge_stage
from tasks.prompts.templates import DEFAULT_TEMPLATE
from tasks.store.workdir import WorkDir

JUDGEBENCH = SHARED_DATA / "judgebench/dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"
PROFILES = {"openai": "gpt-5-mini", "anthropic": "claude-sonnet-4-5"}
COLUMNS: list[tuple[str, str]] = [
    ("profile", "profile"),
    ("prompt_cache", "cache"),
    ("calls", "calls"),
    ("prompt tokens", "prompt"),
    ("cached", "cached"),
    ("cache writes", "writes"),
    ("repeats cached", "repeats"),
    ("input USD", "input_usd"),
    ("input / uncached", "ratio"),
    ("USD", "usd"),
    ("estimated input USD", "estimate"),
]


def _judge(profile: str, base_url: str, cache: str, **kw: Any) -> JudgeSpec:
    """The profile's judge on the simulated judge, priced as its stand-in model."""
    anthropic = profile == "anthropic"
    return JudgeSpec(
        name=profile, provider="anthropic" if anthropic else "openai",
        base_url=base_url.removesuffix("/v1") if anthropic else base_url,
        model="strong", simulated=True, prompt_cache=cache,  # type: ignore[arg-type]
        price=builtin_price(PROFILES[profile]), **kw,
    )  # fmt: skip


def _money_row(root: Path, pairs: list[Pair], k: int, profile: str, cache: str,
               server: SimJudgeServer) -> dict[str, Any]:  # fmt: skip
    staged = stage_plan(WorkDir(root / f"{profile}-{cache}"), "jb", pairs, k=k)
    judge = _judge(profile, server.base_url, cache)
    [est] = estimate_plan(staged.work, staged.plan_id, [judge], DEFAULT_TEMPLATE)
    server.judge.prompt_cache.clear()
    request = JudgeRequest(staged.work, "bench", staged.plan_id, (judge,), DEFAULT_TEMPLATE)
    asyncio.run(run_judge_stage(request))
    [spend] = run_spend(staged.work, "bench")
    replies = read_replies(staged.work).to_pylist()
    price = judge.price
    assert price is not None
    inputs = [{**r, "completion_tokens": 0, "reasoning_tokens": 0} for r in replies]
    input_usd = sum(reply_usd(price, r) for r in inputs)
    uncached = sum(reply_usd(price, r, prompt_cache=False) for r in inputs)
    # The repeats: every call of a prompt but the first answered.
    calls = plan_calls(staged.manifest, staged.presentations, [judge], DEFAULT_TEMPLATE, "b")
    by_key = {r["call_key"]: r for r in replies}
    seen: set[tuple[str, str, str]] = set()
    repeat_tokens = repeat_cached = 0
    for c in sorted(calls, key=lambda c: by_key[c.call_key]["received_at"]):
        if c.prompt in seen:
            repeat_tokens += by_key[c.call_key]["prompt_tokens"]
            repeat_cached += by_key[c.call_key]["cached_prompt_tokens"] or 0
        seen.add(c.prompt)
    return {
        "profile": profile, "cache": cache, "calls": spend.sent_calls,
        "prompt": f"{spend.prompt_tokens:,}", "cached": f"{spend.cached_prompt_tokens:,}",
        "writes": f"{spend.cache_write_tokens:,}",
        "repeats": f"{repeat_cached / repeat_tokens:.1%}",
        "input_usd": f"{input_usd:.4f}", "ratio": f"{input_usd / uncached:.1%}",
        "usd": f"{spend.usd:.4f}",
        "estimate": f"{_estimated_input_usd(est, price):.4f}",
    }  # fmt: skip


def _estimated_input_usd(est: EstimateRow, price: Price) -> float:
    """The estimate's USD for its prompt tokens (its output tokens are a default range)."""
    cached = round((est.cached_share or 0.0) * est.input_tokens)
    return price.usd(est.input_tokens, 0, cached, cache_write_tokens=est.cache_write_tokens)


def money(pairs: int, k: int) -> None:
    if not JUDGEBENCH.is_file():
        sys.exit(f"no JudgeBench file at {JUDGEBENCH}")
    chosen = load_judgebench(JUDGEBENCH)[:pairs]
    personas = [Persona(name="strong", skill=0.9, latency_ms=200, latency_jitter_ms=150)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, SimJudgeServer(personas) as server:
        for profile in PROFILES:
            for cache in ("off", "auto"):
                rows.append(_money_row(Path(tmp), chosen, k, profile, cache, server))
    print(f"JudgeBench: {len(chosen)} pairs, K = {k}, template {DEFAULT_TEMPLATE}; prices of "
          f"{PROFILES['openai']} and {PROFILES['anthropic']} (built-in table)")  # fmt: skip
    print_table(COLUMNS, rows)


def _long_pairs(n: int) -> list[Pair]:
    text = "Each step of the working is shown and checked against the question. " * 55
    return [
        Pair(pair_id=f"tp-{i:06d}", dataset="tp", source="bench", question=f"Question {i}?",
             answer_a=f"A{i}. {text}", answer_b=f"B{i}. {text}", key="A")
        for i in range(n)
    ]  # fmt: skip


def throughput(calls: int, k: int, latency_ms: float, concurrency: int) -> None:
    pairs = _long_pairs(max(1, calls // (2 * k)))
    rates: dict[str, list[float]] = {"off": [], "auto": []}
    args = ("--persona", "strong", "--latency-ms", str(latency_ms))
    with tempfile.TemporaryDirectory() as tmp, simjudge_subprocess(*args) as base_url:
        staged = stage_plan(WorkDir(Path(tmp) / "base"), "tp", pairs, k=k)
        for round_ in range(2):
            for cache in ("off", "auto"):
                work = WorkDir(Path(tmp) / f"{cache}-{round_}")
                plan = staged.copy_to(work)
                judge = _judge("openai", base_url, cache, max_concurrency=concurrency)
                request = JudgeRequest(work, "tp", plan.plan_id, (judge,), DEFAULT_TEMPLATE)
                started = time.perf_counter()
                counts = asyncio.run(run_judge_stage(request))
                wall = time.perf_counter() - started
                assert counts["stored"] == counts["planned"], counts
                rates[cache].append(counts["sent"] / counts["send_seconds"])
                print(f"  {cache:4} round {round_}: {rates[cache][-1]:7,.0f} calls/s "
                      f"({counts['sent']:,} calls, send {counts['send_seconds']:.1f} s, "
                      f"stage {wall:.1f} s)")  # fmt: skip
    best = {c: max(r) for c, r in rates.items()}
    print(f"throughput: {len(pairs) * 2 * k:,} calls, think time {latency_ms:g} ms, "
          f"concurrency {concurrency}: off {best['off']:,.0f}, on {best['auto']:,.0f} calls/s, "
          f"on / off {best['auto'] / best['off']:.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=350)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    if args.pairs:
        money(args.pairs, args.k)
    if args.calls:
        throughput(args.calls, args.k, args.latency_ms, args.concurrency)


if __name__ == "__main__":
    main()
