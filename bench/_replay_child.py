"""The streaming replay alone, for bench/replay.py: a fresh process that imports only what the
replay needs, replays one input file to a folder with `replay_file` (the path of the replay flow
and of `judgeline replay`) and prints its wall and CPU seconds and its peak RSS as JSON.

The peak is this process's own: `VmHWM` of /proc/self/status, the high-water mark of the
memory map exec gave it. `getrusage`'s `ru_maxrss` is not: Linux carries it across exec from
the forked copy of the parent, so it would include whatever the parent held at spawn.

Usage: python bench/_replay_child.py INPUT OUT_DIR
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.replay.stream import replay_file  # noqa: E402


def main() -> None:
    calls, out = sys.argv[1], sys.argv[2]
    wall, cpu = time.perf_counter(), time.process_time()
    replay_file(calls, out)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"wall": wall, "cpu": cpu, "peak_gb": peak_kib() / 1024**2}))


def peak_kib() -> int:
    """This process's peak resident set size in KiB (`VmHWM`)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


if __name__ == "__main__":
    main()
