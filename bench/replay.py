"""Benchmark: exact replay of 1M pairs at K = 2, 4, 8 and 16 against DuckDB on the same input.

Usage: .venv/bin/python bench/replay.py [--pairs N] [--groups G] [--k K [K ...]] [--runs R]
       [--dir DIR] [--reuse-input]

For each K (default 2, 4, 8 and 16) a fresh input of N pairs x 2K calls, then, measured in the
same run (the machine may be shared: the load averages are printed before and after):

- read + engine (all designs and core policies, in memory) against DuckDB scanning and grouping
  the same parquet: at most 4x at K <= 8, 10x at K = 16 (the scan grows with K too). Both sides
  run RUNS times in this process and keep their best wall time (CPU seconds are those of that
  run); the first run of each, which pays for the process's fresh memory, is shown beside it;
- `replay_file` (the replay flow's and `judgeline replay`'s path: the input read once, replayed
  and written group by group) in a fresh process of its own that imports only the replay
  (bench/_replay_child.py), against DuckDB scanning the input and writing the same four tables:
  at most 1.5x;
- that process's peak RSS: under 4 GB, also at `--pairs 10000000` (above 2M pairs only the
  streaming replay runs).

A table of every K ends the output.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.replay.engine import ReplayResult, replay, write_replay  # noqa: E402
from tasks.replay.grid import read_replay_input  # noqa: E402

CHILD = Path(__file__).with_name("_replay_child.py")
IN_MEMORY = 2_000_000
"""Above this many pairs only the streaming replay runs (the in-memory one holds every row)."""
ENGINE_TARGET = {16: 10.0}
"""Read + engine over the scan, per K; 4x where not listed."""
T = TypeVar("T")
SCAN = """
SELECT judge, config, dataset, pair_id, count(*) AS n, string_agg(outcome, '') AS outcomes
FROM read_parquet(?)
GROUP BY judge, config, dataset, pair_id
"""


def make_input(n_pairs: int, n_groups: int, k: int, first: int = 0) -> pa.Table:
    """Outcomes of pairs first..first+n_pairs-1 at K seeds with all six codes: per-pair latent
    preference, per-judge position bias."""
    rng = np.random.default_rng(7 + first)
    pair = np.arange(n_pairs)
    group = (pair + first) % n_groups
    bias = np.linspace(-1.5, 1.5, n_groups)[group]  # >0 prefers the left slot
    latent = rng.normal(0.0, 1.5, n_pairs)
    key = rng.choice(np.array(["A", "B", None], dtype=object), n_pairs, p=[0.45, 0.45, 0.1])

    rows = np.repeat(pair, 2 * k)
    seed_col = np.tile(np.repeat(np.arange(k), 2), n_pairs)
    order_ba = np.tile(np.array([0, 1]), n_pairs * k)
    # P(A wins): identity preference plus a pull toward whichever identity sits left.
    left_pull = np.where(order_ba == 0, bias[rows], -bias[rows])
    p_a = 1.0 / (1.0 + np.exp(-(latent[rows] + left_pull)))
    u = rng.random(len(rows))
    decisive = np.where(rng.random(len(rows)) < p_a, 0, 1)
    code = np.select([u < 0.02, u < 0.04, u < 0.06, u < 0.16], [5, 4, 3, 2], decisive)

    codes = pa.array(["A", "B", "T", "X", "I", "M"])
    judges = pa.array([f"judge-{g}" for g in range(n_groups)])
    pair_ids = pa.array([f"pair-{i + first:08d}" for i in range(n_pairs)])
    return pa.table(
        {
            "judge": judges.take(pa.array(group[rows])),
            "config": pa.repeat(pa.scalar("default"), len(rows)),
            "dataset": pa.repeat(pa.scalar("synthetic"), len(rows)),
            "pair_id": pair_ids.take(pa.array(rows)),
            "seed": pa.array(seed_col, pa.int64()),
            "order": pa.array(["AB", "BA"]).take(pa.array(order_ba)),
            "outcome": codes.take(pa.array(code)),
            "key": pa.array(key, pa.string()).take(pa.array(rows)),
        }
    )


@dataclass(frozen=True)
class Timing:
    """Wall and CPU seconds of the best (fastest wall) of some runs."""

    wall: float
    cpu: float
    best: int
    """Which run (from 0) was the best."""
    first: float
    """Wall seconds of the first run."""


def best_of(runs: int, fn: Callable[[], T]) -> tuple[Timing, T]:
    """The timing of the best of `runs` calls of `fn`, and its value. CPU time is printed too
    because wall time on a shared machine swings with other load. Only the last run's value
    is held (the runs compute the same value)."""
    took: list[tuple[float, float]] = []
    value: T | None = None
    for _ in range(runs):
        value = None
        wall, cpu = time.perf_counter(), time.process_time()
        value = fn()
        took.append((time.perf_counter() - wall, time.process_time() - cpu))
    assert value is not None
    best = min(range(runs), key=lambda run: took[run][0])
    return Timing(took[best][0], took[best][1], best, took[0][0]), value


def timed_read(path: Path, reads: list[tuple[float, float]]) -> pa.Table:
    """The replay input of `path`, appending the read's wall and CPU seconds to `reads`."""
    wall, cpu = time.perf_counter(), time.process_time()
    table = read_replay_input(path)
    reads.append((time.perf_counter() - wall, time.process_time() - cpu))
    return table


def line(label: str, wall: float, cpu: float, note: str = "") -> None:
    print(f"  {label:24s}{wall:8.2f} s wall {cpu:8.2f} s CPU" + (f"  ({note})" if note else ""))


def ratio(label: str, wall: float, cpu: float, target: float) -> None:
    print(f"  {'ratio ' + label:24s}{wall:8.2f} x wall {cpu:8.2f} x CPU  (target <= {target:g})")


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


LARGE_INPUT = """
COPY (
    WITH cells AS (
        SELECT r // (2 * $k) AS pair, (r // 2) % $k AS seed, r % 2 AS ba,
               (hash(r, 23) >> 11) / 9007199254740992.0 AS u,
               (hash(r, 29) >> 11) / 9007199254740992.0 AS v
        FROM range($n * 2 * $k) t(r)
    ), drawn AS (
        SELECT *, pair % $g AS grp,
               CASE WHEN $g > 1 THEN -1.5 + 3.0 * (pair % $g) / ($g - 1) ELSE -1.5 END AS bias,
               1.5 * sqrt(-2 * ln(1 - (hash(pair, 31) >> 11) / 9007199254740992.0))
                   * cos(2 * pi() * (hash(pair, 37) >> 11) / 9007199254740992.0) AS latent,
               (hash(pair, 41) >> 11) / 9007199254740992.0 AS w
        FROM cells
    )
    SELECT 'judge-' || grp AS judge, 'default' AS config, 'synthetic' AS dataset,
           printf('pair-%08d', pair) AS pair_id, seed::BIGINT AS seed,
           CASE ba WHEN 0 THEN 'AB' ELSE 'BA' END AS "order",
           CASE WHEN u < 0.02 THEN 'M' WHEN u < 0.04 THEN 'I' WHEN u < 0.06 THEN 'X'
                WHEN u < 0.16 THEN 'T'
                WHEN v < 1 / (1 + exp(-(latent + CASE ba WHEN 0 THEN bias ELSE -bias END)))
                THEN 'A' ELSE 'B' END AS outcome,
           CASE WHEN w < 0.45 THEN 'A' WHEN w < 0.9 THEN 'B' END AS "key"
    FROM drawn
) TO '{path}' (FORMAT parquet, COMPRESSION zstd)
"""
"""Inputs above IN_MEMORY pairs, written by DuckDB on its threads: the model of `make_input`
(per-pair latent preference, per-judge position bias, all six codes, grid order) with hashes
of the row and pair numbers for its draws, as NumPy takes minutes for 10M pairs."""


def write_input(path: Path, n_pairs: int, n_groups: int, k: int) -> None:
    """Write the input chunk by chunk of pairs (DuckDB above IN_MEMORY pairs)."""
    if n_pairs > IN_MEMORY:
        con = duckdb.connect()
        con.execute("SET enable_progress_bar = false")
        con.execute(LARGE_INPUT.format(path=path), {"n": n_pairs, "k": k, "g": n_groups})
        return
    chunk = max(1, 8_000_000 // (2 * k))
    writer: pq.ParquetWriter | None = None
    for start in range(0, n_pairs, chunk):
        table = make_input(min(chunk, n_pairs - start), n_groups, k, first=start)
        writer = writer or pq.ParquetWriter(path, table.schema, compression="zstd")
        writer.write_table(table)
    assert writer is not None
    writer.close()


def duckdb_write(con: duckdb.DuckDBPyConnection, result: ReplayResult, out: Path) -> Path:
    """DuckDB writing the same four tables to parquet (its defaults, its threads)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("replay", "summary", "design", "components"):
        con.register("rows", getattr(result, name))
        con.execute(f"COPY rows TO '{out / name}.parquet' (FORMAT parquet)")
        con.unregister("rows")
    return out


def streamed(path: Path, out: Path) -> dict[str, float]:
    """`replay_file` in a fresh process (bench/_replay_child.py): wall, CPU and peak RSS."""
    done = subprocess.run(
        [sys.executable, str(CHILD), str(path), str(out)], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"replay_file failed (exit {done.returncode}):\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def bench_k(k: int, args: argparse.Namespace, folder: Path) -> dict[str, float]:
    """Every measure at one K; returns the figures of the final table."""
    path = folder / f"outcomes-k{k}.parquet"
    start = time.perf_counter()
    if not (args.reuse_input and path.is_file()):
        write_input(path, args.pairs, args.groups, k)
    print(f"K = {k}: {args.pairs:,} pairs x {2 * k} calls, {args.groups} groups -> {path}")
    print(f"  generated and written in {time.perf_counter() - start:.2f} s; load {load()}")
    row: dict[str, float] = {"k": k}
    runs = args.runs
    con = duckdb.connect()
    if args.pairs <= IN_MEMORY:
        threads = con.sql("SELECT current_setting('threads')").fetchall()[0][0]
        scan, scanned = best_of(runs, lambda: con.sql(SCAN, params=[str(path)]).to_arrow_table())
        note = f"{scanned.num_rows:,} groups, {threads} threads; best of {runs}"
        line("duckdb scan+group", scan.wall, scan.cpu, f"{note}, first {scan.first:.2f} s")
        del scanned

        reads: list[tuple[float, float]] = []
        total, result = best_of(runs, lambda: replay(timed_read(path, reads)))
        read_s, read_cpu = reads[total.best]
        line("replay: read", read_s, read_cpu)
        rows = f"{result.replay.num_rows:,} replay rows"
        line("replay: engine", total.wall - read_s, total.cpu - read_cpu, rows)
        line("replay: total", total.wall, total.cpu, f"best of {runs}, first {total.first:.2f} s")
        target = ENGINE_TARGET.get(k, 4.0)
        ratio("read+engine / scan", total.wall / scan.wall, total.cpu / scan.cpu, target)
        write, _ = best_of(1, lambda: write_replay(result, folder / "out"))
        line("replay: write 4 files", write.wall, write.cpu)
        duck, _ = best_of(1, lambda: duckdb_write(con, result, folder / "duck"))
        line("duckdb: write 4 files", duck.wall, duck.cpu)
        del result
        row |= {"scan": scan.wall, "engine": total.wall, "engine_x": total.wall / scan.wall}
        row |= {"duck_rw": scan.wall + duck.wall, "duck_rw_cpu": scan.cpu + duck.cpu}

    child = streamed(path, folder / "stream")
    line("replay_file (own process)", child["wall"], child["cpu"], "read, engine and writes")
    if "duck_rw" in row:
        cpu = child["cpu"] / row["duck_rw_cpu"]
        ratio("replay_file / duckdb", child["wall"] / row["duck_rw"], cpu, 1.5)
        print(f"  {'':24s}(duckdb: scan + write 4 files {row['duck_rw']:.2f} s)")
    print(f"  {'peak RSS replay_file':24s}{child['peak_gb']:8.2f} GB  (target < 4)")
    print(f"  load {load()}")
    if not args.reuse_input:
        path.unlink()
    return row | {"stream": child["wall"], "peak_gb": child["peak_gb"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--k", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--runs", type=int, default=3, help="runs of each in-memory side")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument(
        "--reuse-input", action="store_true", help="keep DIR/outcomes-kK.parquet if it exists"
    )
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="judgeline-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"load {load()}")
    rows = [bench_k(k, args, folder) for k in args.k]

    print(f"\n{args.pairs:,} pairs; load {load()}")
    heads = ["K", "scan s", "read+engine s", "x scan", "replay_file s", "duckdb scan+write s"]
    print("| " + " | ".join([*heads, "x", "peak GB"]) + " |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cells = [f"{int(r['k'])}"]
        for name in ("scan", "engine", "engine_x", "stream", "duck_rw"):
            cells.append(f"{r[name]:.2f}" if name in r else "-")
        stream_x = r["stream"] / r["duck_rw"] if "duck_rw" in r else None
        cells.append(f"{stream_x:.2f}" if stream_x is not None else "-")
        cells.append(f"{r['peak_gb']:.2f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
