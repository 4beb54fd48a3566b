"""The streaming replay alone, for bench/replay.py: a fresh process that imports only what the
replay needs, replays one input file to a folder with `replay_file` (the path of the replay flow
and of `judgeline replay`) and prints its wall and CPU seconds and its peak RSS as JSON.

Usage: python bench/_replay_child.py INPUT OUT_DIR
"""

from __future__ import annotations

import json
import resource
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
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux
    print(json.dumps({"wall": wall, "cpu": cpu, "peak_gb": peak_gb}))


if __name__ == "__main__":
    main()
