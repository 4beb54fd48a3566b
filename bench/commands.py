"""What a user waits for: whole `judgeline` commands, start-up included, each against a
baseline process run in the same bench.

Usage: python bench/commands.py [--k 4] [--replay-pairs 1000000] [--repeat 3] [--only replay]

Every judgeline command runs as a user runs it (`.venv/bin/judgeline`, a fresh process,
each job in the command's own process) with the user's Prefect home (a state folder of the
bench's own), so the first one starts the user's local Prefect server and every later one,
in any work dir, reuses it. Lines, each with its ratio and target:

- first command: the overhead (command wall minus its stages' walls) of the command that
  starts the server on a machine that never ran judgeline (target <= 15 s), and of the first
  command in a second new work dir, which finds the server running;
- cold run of the demo's first 147 pairs (the demo's judges, K x 2 calls each) in a NEW work
  dir, the server already running, against a bare asyncio httpx loop sending the same bodies
  from a process of its own at the same concurrency, its connections split into pools of
  four (throughput ratio, target >= 0.45);
- warm run of the same (every call cached) against the same bare loop, and its overhead;
- a warm tiny run (4 pairs, every call cached; its gates already passed) and a 10-line
  JudgeBench import (new data to gate), each against `judgeline runs`, the two in turn
  (targets <= 4x and <= 10x; the median of each run's ratio to the `judgeline runs` right
  before it);
- `judgeline replay --calls` against a Python process doing DuckDB's scan, group and write
  of the same rows: one per pair, design and policy, as the replay writes (target <= 1.5x).

Walls are medians of --repeat runs; the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")
PYTHON = str(REPO / ".venv" / "bin" / "python")
JUDGEBENCH_OUTPUT = (
    REPO.parent / "shared" / "data" / "judgebench"
    / "dataset=judgebench,response_model=gpt-4o-2024-05-13,judge_name=arena_hard,"
    "judge_model=o1-mini-2024-09-12.jsonl"
)  # fmt: skip

BARE_LOOP = """
import asyncio, json, sys, httpx
calls = [json.loads(line) for line in open(sys.argv[1])]
limit = int(sys.argv[2])
POOL = 4  # connections per pool: httpcore walks every connection of a pool per request
async def main():
    pools = {}
    slots = {}
    turn = {}
    ok = 0
    async def one(call):
        nonlocal ok
        judge = call["judge"]
        if judge not in pools:
            pools[judge] = [httpx.AsyncClient(base_url=call["base_url"] + "/", timeout=60,
                limits=httpx.Limits(max_connections=POOL, max_keepalive_connections=POOL))
                for _ in range(max(1, limit // POOL))]
            slots[judge] = asyncio.Semaphore(limit)
            turn[judge] = 0
        async with slots[judge]:
            turn[judge] += 1
            pool = pools[judge][turn[judge] % len(pools[judge])]
            r = await pool.post("chat/completions", json=call["body"])
            ok += r.status_code == 200 and bool(r.json()["choices"])
    await asyncio.gather(*(one(c) for c in calls))
    for judge_pools in pools.values():
        for pool in judge_pools:
            await pool.aclose()
    assert ok == len(calls), (ok, len(calls))
asyncio.run(main())
"""

LABELS = [("common", "full"), ("common", "nonstrict"), ("common", "strict"),
          ("independent", "full"), ("independent", "nonstrict"), ("independent", "strict"),
          ("balanced", "full"), ("balanced", "nonstrict"), ("balanced", "strict"),
          ("balanced", "paired_unanimity")]  # fmt: skip
"""The (design, policy) rows the replay writes for each pair at its defaults."""

DUCKDB_REPLAY = """
import sys, duckdb
src, out, labels = sys.argv[1], sys.argv[2], sys.argv[3]
con = duckdb.connect()
con.execute(f'''CREATE TEMP TABLE p AS
  SELECT judge, config, dataset, pair_id, count(*) AS calls,
         sum(CASE WHEN outcome = 'A' THEN 1 ELSE 0 END) AS a,
         sum(CASE WHEN outcome = 'B' THEN 1 ELSE 0 END) AS b,
         sum(CASE WHEN "order" = 'AB' AND outcome = 'A' THEN 1 ELSE 0 END) AS ab_a,
         sum(CASE WHEN "order" = 'BA' AND outcome = 'A' THEN 1 ELSE 0 END) AS ba_a
  FROM read_parquet('{src}') GROUP BY ALL''')
con.execute(f'''COPY (
  SELECT judge, config, dataset, pair_id, design, policy,
         calls / 2.0 AS expected_calls, a / calls AS p_change, b / calls AS p_neutral_to_decisive,
         ab_a / calls AS p_decisive_to_neutral, ba_a / calls AS p_reversal,
         (a - b) / calls AS expected_score, (a + b) / calls AS reference_score,
         (ab_a + ba_a) / calls AS added_variance, NULL::DOUBLE AS expected_usd
  FROM p CROSS JOIN (VALUES {labels}) l(design, policy))
  TO '{out}/replay.parquet' (FORMAT parquet)''')
con.execute(f'''COPY (
  SELECT judge, config, dataset, pair_id, design, (a - b) / calls AS expected_score,
         (calls - a - b) / calls AS p_neutral, (ab_a + ba_a) / calls AS expected_agreement
  FROM p CROSS JOIN (VALUES ('common'), ('independent'), ('balanced')) l(design))
  TO '{out}/design.parquet' (FORMAT parquet)''')
"""
"""The replay line's baseline: DuckDB scans the calls, groups them per pair and writes the
rows the replay writes (one per pair, design and policy, and one per pair and design), with
columns of the same types; its numbers are simple ratios, not exact expectations."""


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"


class Bench:
    """Commands in one temporary folder, the user's Prefect home (in a state folder of the
    bench's own) for all of them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        self.env.pop("JUDGELINE_WORK_DIR", None)
        self.env["XDG_STATE_HOME"] = str(root / "xdg-state")
        # A machine that never ran judgeline.
        self.env["XDG_CACHE_HOME"] = str(root / "xdg-cache")
        self.env["JUDGELINE_SERVER_IDLE_SECONDS"] = "300"
        self.env["COLUMNS"] = "200"
        self.cpu: list[float] = []

    def timed(self, *args: str, ok: tuple[int, ...] = (0,)) -> float:
        """The command's wall time; its CPU seconds (user + system) go to `self.cpu`."""
        started, before = time.perf_counter(), os.times()
        result = subprocess.run(args, env=self.env, capture_output=True, text=True)
        wall, after = time.perf_counter() - started, os.times()
        self.cpu.append(
            after.children_user - before.children_user + after.children_system
            - before.children_system
        )  # fmt: skip
        if result.returncode not in ok:
            raise SystemExit(f"{' '.join(args)} exited {result.returncode}:\n{result.stderr}")
        return wall

    def judgeline(self, work: Path, *args: str) -> float:
        return self.timed(JUDGELINE, "--work-dir", str(work), *args)

    def median(self, repeat: int, *args: str) -> float:
        return statistics.median(self.timed(*args) for _ in range(repeat))

    def in_turn(
        self, repeat: int, command: tuple[str, ...], baseline: tuple[str, ...]
    ) -> tuple[float, float, float]:
        """`baseline` then `command`, `repeat` times: their median walls and the median of
        each command's wall over the baseline's right before it."""
        pairs = [(self.timed(*baseline), self.timed(*command)) for _ in range(repeat)]
        return (
            statistics.median(c for _, c in pairs),
            statistics.median(b for b, _ in pairs),
            statistics.median(c / b for b, c in pairs),
        )


def latest_stages(work: Path) -> float:
    """The summed stage walls of the newest run in `work`."""
    records = sorted(work.glob("runs/*/record.json"), key=lambda p: p.stat().st_mtime)
    record = json.loads(records[-1].read_text())
    return float(sum(record["stage_seconds"].values()))


def write_config(
    path: Path, work: Path, base_url: str, *, table: Path | None, k: int, tiny: bool = False
) -> None:
    """A run configuration: the demo's judges over `table` (or the demo), one judge config
    of them when `tiny`."""
    from simjudge.demo import demo_config

    config = demo_config(base_url, k=k).model_dump(mode="json", exclude_none=True)
    config["work_dir"] = str(work)
    if table is not None:
        config["datasets"] = [{"kind": "table", "path": str(table), "dataset": "demo147",
                               "mapping": "question=q,answer_a=a,answer_b=b"}]  # fmt: skip
    if tiny:
        config["name"] = "tiny"
        config["judges"] = config["judges"][:1]
        config["judges"][0]["configs"] = config["judges"][0]["configs"][:1]
    import yaml

    path.write_text(yaml.safe_dump(config))


def demo_table(path: Path, pairs: int) -> None:
    """The demo's first `pairs` pairs as a table (question, answer a, answer b)."""
    import csv

    from tasks.ingest.demo_benchmark import demo_pairs

    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["q", "a", "b"])
        for pair in demo_pairs()[:pairs]:
            writer.writerow([pair.question, pair.answer_a, pair.answer_b])


def bare_bodies(work: Path, base_url: str, k: int, out: Path) -> int:
    """The demo's planned request bodies as the run sent them, one JSON line per call."""
    import asyncio

    import httpx

    from simjudge.demo import demo_config
    from tasks.ingest.manifest import read_manifest
    from tasks.judging.planned import plan_calls
    from tasks.judging.providers import OpenAIProvider
    from tasks.plan import read_plan
    from tasks.prompts.templates import DEFAULT_TEMPLATE
    from tasks.store.workdir import WorkDir

    wd = WorkDir(work)
    plan_dir = next(p for p in wd.plans.iterdir() if p.is_dir())
    info, presentations = read_plan(wd, plan_dir.name, gate=False)
    _, manifest = read_manifest(wd, info.manifest_hash, gate=False)
    judges = demo_config(base_url, k=k).judges

    async def render() -> int:
        n = 0
        seen: set[str] = set()
        async with httpx.AsyncClient() as http:
            with out.open("w") as handle:
                for judge in judges:
                    provider = OpenAIProvider(judge, http, None)
                    for call in plan_calls(manifest, presentations, [judge], DEFAULT_TEMPLATE,
                                           "bench"):  # fmt: skip
                        body = provider.body(call.request())
                        line = json.dumps({"judge": judge.name, "base_url": judge.base_url,
                                           "body": body})  # fmt: skip
                        if line in seen:
                            continue  # a pair repeated word for word: judgeline sends it once
                        seen.add(line)
                        handle.write(line + "\n")
                        n += 1
        return n

    return asyncio.run(render())


def replay_input(path: Path, pairs: int, k: int) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    n = pairs * 2 * k
    pair = np.repeat(np.arange(pairs), 2 * k)
    table = pa.table({
        "judge": pa.array(["j"] * n).dictionary_encode(),
        "config": pa.array(["c"] * n).dictionary_encode(),
        "dataset": pa.array(["d"] * n).dictionary_encode(),
        "pair_id": pa.array([f"p{i:07d}" for i in pair]),
        "seed": np.tile(np.repeat(np.arange(k), 2), pairs),
        "order": pa.array(np.tile(["AB", "BA"], pairs * k)),
        "outcome": pa.array(rng.choice(["A", "B", "T", "I"], size=n, p=[0.5, 0.35, 0.1, 0.05])),
        "key": pa.array(np.where(pair % 2 == 0, "A", "B")),
    })  # fmt: skip
    pq.write_table(table, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--replay-pairs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=["replay"], help="print only this line")
    args = parser.parse_args()
    from simjudge.server import simjudge_subprocess

    root = Path(tempfile.mkdtemp(prefix="judgeline-bench-commands-"))
    bench = Bench(root)
    rows: list[tuple[str, str]] = []

    def say(name: str, line: str) -> None:
        rows.append((name, line))
        print(f"{name:<34} {line}   (load {load()})", flush=True)

    try:
        if args.only is None:
            with simjudge_subprocess("--latency-ms", "0") as base_url:
                tiny_csv = root / "tiny.csv"
                tiny_csv.write_text(
                    "q,a,b\n" + "".join(f"Q{i}?,yes {i},no {i}\n" for i in range(4))
                )
                tiny = root / "tiny"
                tiny_config = root / "tiny.yaml"
                write_config(tiny_config, tiny, base_url, table=tiny_csv, k=2, tiny=True)

                # The first command starts the Prefect server: the tiny run, cold.
                wall = bench.judgeline(tiny, "run", str(tiny_config))
                overhead = wall - latest_stages(tiny)
                say("first command (starts the server)",
                    f"{wall:6.1f} s, overhead {overhead:5.1f} s (target <= 15 s)")  # fmt: skip

                # A new work dir: the user's server already runs.
                second = root / "tiny-2"
                write_config(root / "tiny-2.yaml", second, base_url, table=tiny_csv, k=2,
                             tiny=True)  # fmt: skip
                wall = bench.judgeline(second, "run", str(root / "tiny-2.yaml"))
                overhead = wall - latest_stages(second)
                say("first command in a new work dir",
                    f"{wall:6.1f} s, overhead {overhead:5.1f} s (target <= 15 s)")  # fmt: skip

                demo = root / "demo"
                config = root / "demo.yaml"
                pairs_csv = root / "demo147.csv"
                demo_table(pairs_csv, 147)
                write_config(config, demo, base_url, table=pairs_csv, k=args.k)
                wall = bench.judgeline(demo, "run", str(config))
                stages = latest_stages(demo)
                bodies = root / "bodies.jsonl"
                calls = bare_bodies(demo, base_url, args.k, bodies)
                bare = bench.median(args.repeat, PYTHON, "-c", BARE_LOOP, str(bodies), "32")
                say(f"cold 147 pairs, new work dir ({calls:,} calls)",
                    f"{wall:6.1f} s vs bare loop in pools of 4 {bare:5.1f} s: ratio "
                    f"{bare / wall:.2f} (target >= 0.45); "
                    f"overhead {wall - stages:4.1f} s")  # fmt: skip
                warm = [bench.judgeline(demo, "run", str(config)) for _ in range(args.repeat)]
                wall = statistics.median(warm)
                say("warm 147 pairs (all cached)",
                    f"{wall:6.1f} s vs bare loop {bare:5.1f} s: {wall / bare:.2f}x its time; "
                    f"overhead {wall - latest_stages(demo):4.1f} s")  # fmt: skip

                # Each run against a `judgeline runs` right before it: the machine's speed
                # drifts by a third over minutes, and a block of one then a block of the
                # other measures that drift as much as the commands.
                runs_args = (JUDGELINE, "--work-dir", str(tiny), "runs")
                wall, runs, ratio = bench.in_turn(
                    args.repeat, (JUDGELINE, "--work-dir", str(tiny), "run", str(tiny_config)),
                    runs_args,
                )  # fmt: skip
                say("warm tiny run (4 pairs, cached)",
                    f"{wall:6.2f} s vs `judgeline runs` {runs:4.2f} s: {ratio:.2f}x "
                    f"(target <= 4x); overhead {wall - latest_stages(tiny):4.2f} s")  # fmt: skip

                if JUDGEBENCH_OUTPUT.is_file():
                    ten = root / "ten.jsonl"
                    lines = JUDGEBENCH_OUTPUT.read_text().splitlines(keepends=True)[:10]
                    ten.write_text("".join(lines))
                    imports = root / "imports"
                    wall, runs, ratio = bench.in_turn(
                        args.repeat,
                        (JUDGELINE, "--work-dir", str(imports), "import", "judgebench", str(ten)),
                        runs_args,
                    )  # fmt: skip
                    say("10-line JudgeBench import (new data)",
                        f"{wall:6.2f} s vs `judgeline runs` {runs:4.2f} s: {ratio:.2f}x "
                        "(target <= 10x)")  # fmt: skip

        if args.replay_pairs:
            src = root / "replay-input.parquet"
            replay_input(src, args.replay_pairs, args.k)
            bench.cpu.clear()
            (root / "duck").mkdir()
            labels = ", ".join(f"('{d}', '{p}')" for d, p in LABELS)
            duck = bench.median(args.repeat, PYTHON, "-c", DUCKDB_REPLAY, str(src),
                                str(root / "duck"), labels)  # fmt: skip
            duck_cpu = statistics.median(bench.cpu)
            bench.cpu.clear()
            walls = []
            for i in range(args.repeat):
                out = root / f"replay-{i}"
                walls.append(bench.judgeline(root / "replay-work", "replay", "--calls", str(src),
                                             "--out", str(out)))  # fmt: skip
            wall = statistics.median(walls)
            say(f"replay --calls ({args.replay_pairs:,} pairs, K={args.k})",
                f"{wall:6.2f} s vs DuckDB process {duck:5.2f} s: {wall / duck:.2f}x "
                f"(target <= 1.5x); CPU {statistics.median(bench.cpu):5.2f} s vs "
                f"{duck_cpu:5.2f} s")  # fmt: skip
    finally:
        subprocess.run([JUDGELINE, "--work-dir", str(root / "tiny"), "server", "stop"],
                       env=bench.env, capture_output=True)  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
    print()
    for name, line in rows:
        print(f"| {name} | {line} |")


if __name__ == "__main__":
    main()
