"""Benchmark: the import's own work for K repeated JudgeBench runs, stage by stage.

Usage: .venv/bin/python bench/imports.py [--k 10] [--data ../shared/data]

Writes K files holding the real o1-mini JudgeBench judgments (350 pairs, 700 replies each;
distinct bytes, same records) into a temporary folder and runs the import flow's stages as
plain functions in this process: read and check the files, build the run (manifest, plan,
cached replies, calls), remap (parse, gate, outcomes, dispositions) and write, the warehouse,
agreement and summary, the replay (even K) and the report. Prefect's start-up and the first
import of great-expectations are left out (both are paid once per process, not per reply);
the modules are imported before the clock starts.

Prints each stage's CPU and wall seconds, and one ratio line: the stages' CPU against a bare
`json.loads` of every line of the same files (the least any import must do).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import great_expectations  # noqa: E402, F401  (its first import is start-up, not import work)
import pyarrow.parquet as pq  # noqa: E402

from schemas.vocabulary import DESIGNS, POLICIES  # noqa: E402
from tasks.imports import (  # noqa: E402
    ImportOptions,
    agreement,
    build_import,
    check_files,
    import_summary,
    imported_table,
    read_seeds,
)
from tasks.remap import remap_run, write_remap  # noqa: E402
from tasks.replay.stream import replay_file  # noqa: E402
from tasks.report.data import build_report  # noqa: E402
from tasks.runs.folder import RunFolder  # noqa: E402
from tasks.runs.jobs import new_record  # noqa: E402
from tasks.runs.record import outcome_counts, write_record  # noqa: E402
from tasks.store.workdir import WorkDir  # noqa: E402
from tasks.warehouse import build_warehouse  # noqa: E402

O1_MINI = (
    "judgebench/dataset=judgebench,response_model=gpt-4o-2024-05-13,"
    "judge_name=arena_hard,judge_model=o1-mini-2024-09-12.jsonl"
)


def write_seeds(source: Path, root: Path, k: int) -> list[str]:
    """K copies of `source`, each in its own folder, made distinct by trailing spaces."""
    lines = source.read_text("utf-8").splitlines()
    paths = []
    for seed in range(k):
        folder = root / f"seed{seed}"
        folder.mkdir()
        path = folder / source.name
        path.write_text("\n".join([lines[0] + " " * seed, *lines[1:]]) + "\n", "utf-8")
        paths.append(str(path))
    return paths


def timed(stages: list[tuple[str, float, float]], name: str, step: Callable[[], object]) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    step()
    stages.append((name, time.process_time() - cpu, time.perf_counter() - wall))


def run(paths: list[str], work: WorkDir) -> list[tuple[str, float, float]]:
    """The import flow's stages for `paths`, each timed."""
    stages: list[tuple[str, float, float]] = []
    files: list = []
    record = new_record("bench", "import judgebench", {"import": "judgebench", "k": len(paths)})
    timed(stages, "read", lambda: files.extend(
        f for p in paths for f in read_seeds("judgebench", p, ImportOptions())
    ))  # fmt: skip
    timed(stages, "check", lambda: check_files(files))

    def build() -> None:
        built = build_import(work, files, "bench")
        record.manifest_hash, record.plan_id = built.manifest_hash, built.plan_id
        record.calls, record.imported = built.counts, built.imported
        write_record(work, record)

    timed(stages, "build", build)
    timed(stages, "remap", lambda: write_remap(work, remap_run(work, "bench")))
    timed(stages, "warehouse", lambda: build_warehouse(work))
    folder = RunFolder(work, "bench")

    def summarise() -> None:
        record.outcomes = outcome_counts(folder)
        table = imported_table(work, "bench")
        assert table is not None and record.imported is not None
        labels, calls = pq.read_table(folder.table("labels")), pq.read_table(folder.calls)
        record.imported["agreement"] = agreement(table, labels, calls)
        record.imported["summary"] = import_summary(folder)
        write_record(work, record)

    timed(stages, "agreement", summarise)
    if len(paths) % 2 == 0:
        timed(stages, "replay", lambda: replay_file(
            str(folder.outcomes), str(folder.path), designs=list(DESIGNS),
            policies=list(POLICIES), costs=None,
        ))  # fmt: skip
    timed(stages, "report", lambda: build_report(work, "bench"))
    return stages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = write_seeds(args.data / O1_MINI, root, args.k)
        cpu = time.process_time()
        replies = sum(
            len(json.loads(line)["judgments"])
            for p in paths
            for line in Path(p).read_text("utf-8").splitlines()
        )
        floor = time.process_time() - cpu
        stages = run(paths, WorkDir.at(root / "work"))
    total_cpu, total_wall = sum(s[1] for s in stages), sum(s[2] for s in stages)
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"import of K = {args.k} files, {replies} replies (load average {load})")
    for name, cpu_s, wall_s in stages:
        print(f"  {name:<10} {cpu_s:6.2f} s CPU {wall_s:6.2f} s wall")
    print(f"  {'total':<10} {total_cpu:6.2f} s CPU {total_wall:6.2f} s wall")
    print(f"ratio: the import's own work {total_cpu / floor:.1f}x a bare json.loads of the files "
          f"({floor:.2f} s CPU)")  # fmt: skip


if __name__ == "__main__":
    main()
