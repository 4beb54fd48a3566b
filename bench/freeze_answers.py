"""Freezing a large answers table: peak memory and time of `judgeline freeze --answers`.

Usage: python bench/freeze_answers.py [--questions 250000] [--systems 4]

Generates a CSV of one short answer per question and system (250,000 questions x 4 systems:
a million rows, 67 MB, the shape of a large leaderboard's answers), then runs
`.venv/bin/judgeline freeze --answers FILE --baseline sys0` in a fresh process and a fresh
work dir. Prints the file's size, the pairs, the command's peak resident memory (its
`ru_maxrss`) and its ratio to the file (target: at most 1.5 GiB for the million rows), and
its wall and CPU seconds (with the load average: the machine may be shared).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_table(path: Path, questions: int, systems: int) -> None:
    names = [f"sys{s}" for s in range(systems)]
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("question_id,question,system,answer\n")
        for q in range(questions):
            question = f"What is {q} plus {q % 97}?"
            for name in names:
                out.write(f"q{q:06d},{question},{name},The answer of {name} is {q + q % 97}.\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=250_000)
    parser.add_argument("--systems", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-freeze-") as tmp:
        table = Path(tmp) / "answers.csv"
        write_table(table, args.questions, args.systems)
        size = table.stat().st_size
        command = [str(REPO / ".venv" / "bin" / "judgeline"), "--work-dir", f"{tmp}/work",
                   "freeze", "--answers", str(table), "--baseline", "sys0"]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            sys.exit(done.stderr)
        peak = after.ru_maxrss * (1 if sys.platform == "darwin" else 1024)  # bytes, KiB
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        rows = args.questions * args.systems
        print(f"answers: {rows:,} rows, {size / 1e6:.1f} MB; "
              f"{args.questions * (args.systems - 1):,} pairs")  # fmt: skip
        print(f"peak memory: {peak / 2**30:.2f} GiB ({peak / size:.0f}x the file; target "
              f"<= 1.5 GiB for 1,000,000 rows)")  # fmt: skip
        print(f"time: {wall:.1f} s wall, {cpu:.1f} s CPU (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
