"""Pacing by token budget: a run against a judge limited to T tokens per minute, with and
without the judge's `tokens_per_minute`.

Usage: python bench/pacing.py [--calls 2000] [--tpm 200000] [--runs 2]

The simulated judge runs in a subprocess with `--tokens-per-minute T` (a token bucket: a
request counts its prompt and reply limit on arrival, 429 past it, the unused reply limit
given back). The paced run splits its calls between `--runs` processes started together,
each a judge client with `tokens_per_minute: T` and one shared budget (a file under a
temporary folder, as a user's cache folder holds it); the unpaced run sends the same calls
from one process without it, as judgeline did before (429s, Retry-After, fewer requests in
flight). Prints, for each: calls, requests answered 429 (target <= 1% paced), wall time from
the first call to the last reply and its ratio to the time the limit allows (target <= 1.15
paced): the tokens the replies used beyond one full bucket, at T per minute.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from schemas.judge import JudgeSpec  # noqa: E402
from simjudge.server import simjudge_subprocess  # noqa: E402
from tasks.judging.client import JudgeClient  # noqa: E402
from tasks.judging.providers import CallRequest  # noqa: E402

MAX_TOKENS = 100
MODEL = "strong"


def _messages(i: int) -> tuple[dict[str, str], ...]:
    """A short prompt (about 100 tokens), distinct per call."""
    text = f"Call {i}. " + "Compare the two answers and say which one is better. " * 7
    return ({"role": "system", "content": "You judge answers."}, {"role": "user", "content": text})


async def _send(base_url: str, calls: range, tpm: float | None) -> dict[str, int]:
    spec = JudgeSpec(
        name="paced", base_url=base_url, model=MODEL, max_tokens=MAX_TOKENS, seed=None,
        tokens_per_minute=tpm, max_concurrency=16, max_retries=8, prompt_cache="off",
    )  # fmt: skip
    config = spec.configs[0]
    stored = failed = tokens = 0
    began = time.time()
    async with JudgeClient(spec, None) as client:
        results = await asyncio.gather(
            *(
                client.send(
                    CallRequest(call_key=f"k{i}", messages=_messages(i), seed=i, config=config)
                )  # fmt: skip
                for i in calls
            )
        )
    for result in results:
        if result.reply is not None:
            stored += 1
            tokens += (result.reply.prompt_tokens or 0) + (result.reply.completion_tokens or 0)
        else:
            failed += 1
    return {"stored": stored, "failed": failed, "tokens": tokens, "began": began,
            "ended": time.time()}  # fmt: skip


def _worker(args: argparse.Namespace) -> None:
    start, stop = args.worker
    counts = asyncio.run(_send(args.url, range(start, stop), args.tpm if args.paced else None))
    print(json.dumps(counts))


def _log(base_url: str) -> list[dict[str, object]]:
    root = base_url.rsplit("/v1", 1)[0]
    return list(httpx.get(root + "/_judgeline/log", timeout=60).json())


def _run(calls: int, tpm: float, runs: int, paced: bool) -> dict[str, object]:
    """One run against a fresh judge (its bucket full)."""
    with (
        simjudge_subprocess("--tokens-per-minute", str(tpm)) as base_url,
        tempfile.TemporaryDirectory() as budgets,
    ):
        env = {**os.environ, "JUDGELINE_TOKEN_BUDGETS": budgets}
        bounds = [(calls * r // runs, calls * (r + 1) // runs) for r in range(runs)]
        started = time.perf_counter()
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--url",
                    base_url,
                    "--tpm",
                    str(tpm),
                    "--worker",
                    str(a),
                    str(b),
                    *(["--paced"] if paced else []),
                ],
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )  # fmt: skip
            for a, b in bounds
        ]
        outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        total = time.perf_counter() - started
        log = _log(base_url)
    # From the first call sent to the last answered (the processes' start-up is not paced).
    wall = max(float(o["ended"]) for o in outs) - min(float(o["began"]) for o in outs)
    limited = sum(1 for e in log if e.get("status") == 429)
    counted = sum(int(o["tokens"]) for o in outs)
    allowed = max(0.0, counted - tpm) / (tpm / 60.0)
    return {
        "paced": paced,
        "processes": runs,
        "stored": sum(int(o["stored"]) for o in outs),
        "failed": sum(int(o["failed"]) for o in outs),
        "requests": len(log),
        "answered_429": limited,
        "share_429": f"{limited / max(1, len(log)):.2%}",
        "tokens_counted": counted,
        "wall_s": round(wall, 1),
        "with_startup_s": round(total, 1),
        "allowed_s": round(allowed, 1),
        "ratio": round(wall / allowed, 3) if allowed else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--tpm", type=float, default=200_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--url")
    parser.add_argument("--paced", action="store_true")
    parser.add_argument("--worker", type=int, nargs=2)
    args = parser.parse_args()
    if args.worker:
        _worker(args)
        return
    rows = [
        _run(args.calls, args.tpm, args.runs, paced=True),
        _run(args.calls, args.tpm, 1, paced=False),
    ]
    for row in rows:
        print(json.dumps(row))
    paced = rows[0]
    ok = paced["answered_429"] <= 0.01 * int(paced["requests"])  # type: ignore[operator]
    ok = ok and paced["ratio"] is not None and float(paced["ratio"]) <= 1.15  # type: ignore[arg-type]
    print(f"paced: {paced['share_429']} answered 429, {paced['ratio']}x the time the limit "
          f"allows; unpaced: {rows[1]['answered_429']} answered 429 -> "
          f"{'PASS' if ok else 'FAIL'}")  # fmt: skip


if __name__ == "__main__":
    main()
