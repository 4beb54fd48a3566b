"""Judge-stage throughput: the real flow against a bare httpx loop, and a fully cached rerun.

Usage: python bench/judge_throughput.py [--calls 10000] [--cached 100000] [--concurrency 64]

Both sides talk to the simulated judge in a subprocess with zero think time, at the same
concurrency, with the same request bodies. Prints calls/s for each and their ratio (target
>= 0.8), then the wall time of the judge stage over a cache that already holds every reply
(target < 10 s at 100,000 calls).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

_HOME = Path(tempfile.mkdtemp(prefix="judgeline-bench-prefect-"))
os.environ.setdefault("PREFECT_HOME", str(_HOME))
os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(_HOME / "results"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from _common import warm_prefect  # noqa: E402

from schemas.calls import ReplyRecord  # noqa: E402
from schemas.judge import JudgeSpec  # noqa: E402
from schemas.manifest import Pair  # noqa: E402
from simjudge.server import simjudge_subprocess  # noqa: E402
from tasks.ingest.manifest import freeze_manifest, read_manifest  # noqa: E402
from tasks.judging.cache import compact, write_replies  # noqa: E402
from tasks.judging.planned import PlannedCall, plan_calls  # noqa: E402
from tasks.judging.providers import CALL_KEY_HEADER, OpenAIProvider  # noqa: E402
from tasks.plan import make_plan, write_plan  # noqa: E402
from tasks.prompts.templates import DEFAULT_TEMPLATE  # noqa: E402
from tasks.store.workdir import WorkDir  # noqa: E402

K = 4


def _pairs(n: int, tag: str) -> list[Pair]:
    """n synthetic pairs with distinct, answer-sized texts."""
    filler = "The reasoning goes step by step and checks each intermediate value. " * 4
    return [
        Pair(
            pair_id=f"{tag}-{i:06d}",
            dataset=f"bench-{tag}",
            source="bench",
            question=f"Question {i}: what is {i} + {i * 7 % 97}?",
            answer_a=f"Answer A to {i}. {filler}So the result is {i + i * 7 % 97}.",
            answer_b=f"Answer B to {i}. {filler}So the result is {i + i * 7 % 97 + 1}.",
            key="A" if i % 2 else "B",
        )
        for i in range(n)
    ]


def _stage(work: WorkDir, calls: int, tag: str) -> str:
    """Freeze a manifest and a full-grid plan giving `calls` presentations; the plan id."""
    frozen = freeze_manifest([(tag, _pairs(max(1, calls // (2 * K)), tag))], work)
    _, manifest = read_manifest(work, frozen.info.manifest_hash)
    info, table = make_plan(manifest, K, "full", None)
    write_plan(work, info, table)
    return info.plan_id


def _planned(work: WorkDir, plan_id: str, judge: JudgeSpec) -> list[PlannedCall]:
    from tasks.plan import read_plan

    info, presentations = read_plan(work, plan_id, gate=False)
    _, manifest = read_manifest(work, info.manifest_hash, gate=False)
    return plan_calls(manifest, presentations, [judge], DEFAULT_TEMPLATE, "bench")


async def _bare_loop(judge: JudgeSpec, planned: list[PlannedCall]) -> tuple[float, float]:
    """The floor: same bodies, same pool and concurrency, no records.

    Returns (calls/s, client CPU ms per call).
    """
    limits = httpx.Limits(
        max_connections=judge.max_concurrency, max_keepalive_connections=judge.max_concurrency
    )
    async with httpx.AsyncClient(
        base_url=judge.base_url + "/", limits=limits, timeout=judge.request_timeout()
    ) as http:
        provider = OpenAIProvider(judge, http, None)
        bodies = [(c.call_key, provider.body(c.request())) for c in planned]
        slots = asyncio.Semaphore(judge.max_concurrency)
        ok = 0

        async def one(key: str, body: dict[str, object]) -> None:
            nonlocal ok
            async with slots:
                response = await http.post(
                    "chat/completions", json=body, headers={CALL_KEY_HEADER: key}
                )
                if response.status_code == 200 and response.json()["choices"]:
                    ok += 1

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(k, b) for k, b in bodies))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert ok == len(bodies), f"bare loop: only {ok} of {len(bodies)} calls succeeded"
    return len(bodies) / elapsed, 1000 * cpu / len(bodies)


def _run_flow(
    work: WorkDir, run_id: str, plan_id: str, judge: JudgeSpec
) -> tuple[dict, float, float]:
    """Run the real judge flow; (counts, wall seconds, CPU seconds of this process)."""
    from flows.stageflows import judge_flow

    started, cpu = time.perf_counter(), time.process_time()
    counts = asyncio.run(
        judge_flow(
            run_id=run_id, plan_id=plan_id, judges=[judge], work_dir=str(work.root), batch_size=500
        )
    )
    return counts, time.perf_counter() - started, time.process_time() - cpu


def throughput(root: Path, base_url: str, calls: int, concurrency: int) -> None:
    work = WorkDir(root / "throughput")
    judge = JudgeSpec(
        name="bench", base_url=base_url, simulated=True, model="strong",
        max_concurrency=concurrency, max_retries=0,
    )  # fmt: skip
    plan_id = _stage(work, calls, "tp")
    planned = _planned(work, plan_id, judge)
    print(f"throughput: {len(planned):,} calls, concurrency {concurrency}")
    bare = [asyncio.run(_bare_loop(judge, planned))]
    counts, wall, cpu = _run_flow(work, "bench-tp", plan_id, judge)
    bare.append(asyncio.run(_bare_loop(judge, planned)))
    assert counts["stored"] == len(planned) and counts["sent"] == len(planned), counts
    send_rate = counts["sent"] / counts["send_seconds"]
    wall_rate = counts["sent"] / wall
    floor = max(rate for rate, _ in bare)
    cpu_bare = min(c for _, c in bare)
    print(
        f"  bare httpx loop         {bare[0][0]:8,.0f} / {bare[1][0]:,.0f} calls/s (before / after)"
        f"   client CPU {bare[0][1]:.2f} / {bare[1][1]:.2f} ms per call"
    )
    print(f"  judge flow, send phase  {send_rate:8,.0f} calls/s   ratio {send_rate / floor:.2f}")
    print(
        f"  judge flow, whole stage {wall_rate:8,.0f} calls/s   ratio {wall_rate / floor:.2f}"
        f"   ({wall:.1f} s incl. planning, gates, records)"
    )
    per_call = 1000 * cpu / len(planned)
    print(
        f"  client CPU, whole stage {per_call:8.2f} ms per call = {per_call / cpu_bare:.2f}x the"
        " bare loop's (includes planning, gates and records)"
    )


def cached_rerun(root: Path, base_url: str, calls: int) -> None:
    work = WorkDir(root / "cached")
    judge = JudgeSpec(name="bench", base_url=base_url, simulated=True, model="strong")
    plan_id = _stage(work, calls, "cache")
    planned = _planned(work, plan_id, judge)
    now = dt.datetime.now(dt.UTC)
    chunk = 200  # the size the live writer flushes at: the realistic worst case
    for i in range(0, len(planned), chunk):
        write_replies(
            work,
            [
                ReplyRecord(
                    call_key=c.call_key,
                    provider="openai",
                    model="strong",
                    raw_reply="[[A>B]]",
                    latency_ms=1.0,
                    received_at=now,
                )
                for c in planned[i : i + chunk]
            ],
        )
    files = len(list(work.replies.glob("*.parquet")))
    print(f"cached rerun: {len(planned):,} calls, cache seeded in {files} files")
    counts, wall, _ = _run_flow(work, "bench-cached", plan_id, judge)
    assert counts["sent"] == 0 and counts["stored"] == len(planned), counts
    print(f"  judge stage, {files} reply files  {wall:6.2f} s   (sent {counts['sent']})")
    merged, _ = compact(work)
    counts, wall, _ = _run_flow(work, "bench-cached", plan_id, judge)
    assert counts["sent"] == 0
    print(f"  judge stage, compacted ({merged} -> 1) {wall:6.2f} s   (sent {counts['sent']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--cached", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="judgeline-bench-") as tmp:
        print(f"prefect warm-up flow: {warm_prefect():.1f} s (not counted)")
        with simjudge_subprocess("--persona", "strong", "--latency-ms", "0") as base_url:
            if args.calls:
                throughput(Path(tmp), base_url, args.calls, args.concurrency)
            if args.cached:
                cached_rerun(Path(tmp), base_url, args.cached)


if __name__ == "__main__":
    main()
