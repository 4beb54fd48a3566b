"""A cached rerun on an object-store work dir against the same rerun on a local disk.

Usage: python bench/store.py [--pairs 150] [--k 4] [--repeats 3]

Starts moto's S3-compatible server on loopback and the simulated judge, stages the demo
plan (150 pairs, K = 4: 7,200 calls over the demo's six judge configs) in a local work dir
and in an `s3://` one, judges it once in each (every call sent and stored), then times the
rerun that finds every call cached: the judge stage (it reads the plan, the manifest and
every stored reply key, and writes the run's calls table) and the warehouse over the run's
tables, as a new process would run them:

- local disk: the work dir on this machine's disk;
- store, warm scratch: the store, read through a scratch dir that already holds the copy
  (a worker's second night);
- store, cold scratch: the store from an empty scratch dir (a fresh container).

Prints the median seconds of each and their ratio to the local disk.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from _common import quiet_judge  # noqa: I001  (puts this checkout on the path)
from support import stage_demo_plan

import tasks.store as store_module
from simjudge.demo import demo_config
from tasks.judging.request import JudgeRequest
from tasks.judging.stage import run_judge_stage
from tasks.store import files as store_files
from tasks.store.workdir import WorkDir
from tasks.warehouse import build_warehouse


@contextmanager
def s3_server() -> Iterator[str]:
    """moto's server on a free loopback port; the AWS variables point at it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench",
                      AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1",
                      AWS_ALLOW_HTTP="true")  # fmt: skip
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
                break
            except OSError:
                time.sleep(0.1)
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{bucket}", method="PUT"))
        yield f"s3://{bucket}/judgeline"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def forget_open_stores() -> None:
    """As a new process: no store opened yet, no listing remembered (the scratch stays)."""
    store_module._OPEN.clear()
    store_files._COPIES.clear()


def rerun(work: WorkDir, plan_id: str, base_url: str, k: int) -> None:
    config = demo_config(base_url, k=k)
    judges = tuple(j.model_copy(update={"simulated": True}) for j in config.judges)
    counts = asyncio.run(run_judge_stage(JudgeRequest(work, "bench", plan_id, judges)))
    assert counts["sent"] == 0, counts
    build_warehouse(work)


def median_s(setup: Callable[[], WorkDir], plan_id: str, base_url: str, k: int, n: int) -> float:
    times = []
    for _ in range(n):
        work = setup()
        started = time.perf_counter()
        rerun(work, plan_id, base_url, k)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pairs", type=int, default=150)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    repeats = args.repeats
    with quiet_judge() as (root, server), s3_server() as url:
        local = WorkDir(root / "local")
        staged = stage_demo_plan(local, pairs=args.pairs, k=args.k)
        on_store = WorkDir.at(url, scratch=root / "scratch-first")
        stage_demo_plan(on_store, pairs=args.pairs, k=args.k)
        judges = tuple(
            j.model_copy(update={"simulated": True})
            for j in demo_config(server.base_url, k=args.k).judges
        )
        for work in (local, on_store):
            started = time.perf_counter()
            request = JudgeRequest(work, "bench", staged.plan_id, judges)
            counts = asyncio.run(run_judge_stage(request))
            took = time.perf_counter() - started
            where = "store" if work.url else "local"
            calls = counts["planned"]
            print(f"first run on {where}: {counts['sent']:,} calls sent in {took:.1f} s")

        warm = root / "scratch-warm"
        forget_open_stores()
        rerun(WorkDir.at(url, scratch=warm), staged.plan_id, server.base_url, args.k)
        cold = iter(range(1000))

        def warm_store() -> WorkDir:
            forget_open_stores()
            return WorkDir.at(url, scratch=warm)

        def cold_store() -> WorkDir:
            forget_open_stores()
            return WorkDir.at(url, scratch=root / f"scratch-cold-{next(cold)}")

        plan = staged.plan_id
        rows = [
            ("local disk", median_s(lambda: local, plan, server.base_url, args.k, repeats)),
            ("store, warm scratch", median_s(warm_store, plan, server.base_url, args.k, repeats)),
            ("store, cold scratch", median_s(cold_store, plan, server.base_url, args.k, repeats)),
        ]
        base = rows[0][1]
        print(f"\ncached rerun of {calls:,} calls (judge stage + warehouse), median of {repeats}")
        print(f"load average: {Path('/proc/loadavg').read_text().strip()}")
        for name, seconds in rows:
            print(f"  {name:22} {seconds:6.2f} s   {seconds / base:5.2f}x local disk")


if __name__ == "__main__":
    main()
