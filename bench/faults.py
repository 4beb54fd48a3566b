"""Reliability of the judge stage at size: kills, fault storms, concurrent runs, corrupt files.

Usage: python bench/faults.py [--pairs 100] [--k 4] [--latency-ms 40] [--concurrency 16]
                              [--only storms crash sigint sigterm concurrent same corrupt full]

Every scenario runs the real judge stage (Prefect flows in this process, or `judgeline
judge` subprocesses on the same Prefect server) against the simulated judge on loopback,
then prints one row: planned calls, stored, failed by category after the faulty run, calls
sent again by rerun-failed, stored calls requested again (must be 0), calls paid twice
(only calls in flight when a process was SIGKILLed may be: at most kills x concurrency;
SIGINT and SIGTERM store the replies in flight, so none),
replies lost (must be 0) and wall time. A last line compares request rates with and without 429s.
The stop scenarios signal each life of a run after a random number of its calls, while at
least half of the others are still to send; a run too small for --kills stops fewer times
(the row says how many). The disk-full scenario runs on a tmpfs (it needs the right to
mount one: root), filled up mid-run, then resumed: nothing may be paid twice.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

_HOME = Path(tempfile.mkdtemp(prefix="judgeline-bench-prefect-"))
os.environ.setdefault("PREFECT_HOME", str(_HOME))
os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(_HOME / "results"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")

import pyarrow.parquet as pq  # noqa: E402
from _faultbench import NO_FAULTS, Bench, Row, audit, print_rows, rate, readable, texts  # noqa: E402

from simjudge.persona import Persona  # noqa: E402
from simjudge.server import SimJudgeServer  # noqa: E402
from tasks.store.workdir import WorkDir  # noqa: E402

STOPS = {"crash": signal.SIGKILL, "sigint": signal.SIGINT, "sigterm": signal.SIGTERM}
"""Scenarios that stop a run with a signal to its process group, then resume it."""
SCENARIOS = ["storms", *STOPS, "concurrent", "same", "corrupt", "full"]


def storm(bench: Bench, name: str, faults: dict[str, Any], **judge_kw: Any) -> Row:
    row = Row(name)
    work = bench.fresh(name)
    bench.server.set_faults(**{**NO_FAULTS, **faults})
    bench.server.clear_log()
    started = time.perf_counter()
    counts = bench.run(work, name, bench.judge(**judge_kw))
    row.failed = counts["failed_by_category"]
    if counts["pending"]:
        row.note = f"{counts['pending']} pending!"
    bench.server.set_faults(**NO_FAULTS)
    stored_before = texts(work)
    row.resent = bench.rerun(work, name)["sent"]
    row.seconds = time.perf_counter() - started
    after = texts(work)
    row.lost = sum(after.get(k) != v for k, v in stored_before.items())
    audit(row, work, name, bench.server.request_log())
    return row


def crash(bench: Bench, kills: int, rng: random.Random, signum: int = signal.SIGKILL) -> Row:
    """Stop a run `kills` times with `signum` to its process group, then resume it.

    SIGKILL may pay twice for the calls in flight; SIGINT and SIGTERM let them finish and
    store them, so nothing is paid twice (and the process exits 128 + signum)."""
    name = signal.Signals(signum).name
    kind = "crash" if signum == signal.SIGKILL else "stop"
    row = Row(f"{kind}: {name} x{kills}, resume")
    work = bench.fresh(f"crash-{name}")
    # Slower judge: each life should store some replies and die mid-run.
    concurrency = max(2, bench.args.concurrency // 8)
    judge = bench.judge(max_concurrency=concurrency)
    judges = bench.judges_file(work, judge)
    bench.server.set_faults(**NO_FAULTS)
    bench.server.clear_log()
    snapshots: list[dict[str, str]] = []
    stops: list[float] = []
    started = time.perf_counter()
    for _ in range(kills):
        # Stop each life after a random number of its calls, at most half of those it
        # cannot have in flight: the signal lands mid-run, never in its last stages.
        most = (bench.planned - len(texts(work)) - concurrency) // 2
        if most < 1:
            break  # too few calls left to stop a run mid-way: the resume below ends it
        proc = bench.start(work, judges, "crash")
        if not sent_some(bench, proc, rng.randint(1, most)):
            proc.communicate()
            break  # it ended before it sent them
        os.killpg(proc.pid, signum)
        signalled = time.perf_counter()
        output, _ = proc.communicate()
        stops.append(time.perf_counter() - signalled)
        expected = -signum if signum == signal.SIGKILL else 128 + signum
        if proc.returncode != expected:
            raise SystemExit(f"{name}: exit {proc.returncode}, not {expected}:\n{output}")
        snapshots.append(texts(work))
    proc = bench.start(work, judges, "crash")
    output, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"resumed crash run failed:\n{output}")
    row.seconds = time.perf_counter() - started
    final = texts(work)
    row.lost = sum(final.get(k) != v for snap in snapshots for k, v in snap.items())
    audit(row, work, "crash", bench.server.request_log())
    row.scenario = f"{kind}: {name} x{len(snapshots)}, resume"
    row.note = "replies stored at each kill: " + ", ".join(str(len(s)) for s in snapshots)
    row.note += f" (in flight at the kills: at most {len(snapshots)} x {concurrency})"
    row.note += "; exited after " + ", ".join(f"{s:.1f}" for s in stops) + " s"
    return row


def sent_some(bench: Bench, proc: subprocess.Popen[str], calls: int) -> bool:
    """Wait until the run `proc` has sent `calls` more requests to the judge; False if it
    ended first."""
    target = len(bench.server.request_log()) + calls
    while len(bench.server.request_log()) < target:
        if proc.poll() is not None:
            return False
        time.sleep(0.005)
    return proc.poll() is None


def concurrent(bench: Bench) -> Row:
    row = Row("two runs, one cache")
    work = bench.fresh("concurrent")
    judges = bench.judges_file(work, bench.judge())
    bench.server.set_faults(**NO_FAULTS)
    bench.server.clear_log()
    started = time.perf_counter()
    procs = [bench.start(work, judges, run_id) for run_id in ("left", "right")]
    for proc in procs:
        output, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"concurrent run failed:\n{output}")
    row.seconds = time.perf_counter() - started
    audit(row, work, "left", bench.server.request_log())
    bad = sum(1 for p in work.replies.glob("*.parquet") if not readable(p))
    row.lost = len(list(work.quarantine.iterdir())) + bad
    return row


def same_run_id(bench: Bench) -> Row:
    row = Row("same run id twice")
    work = bench.fresh("same")
    judges = bench.judges_file(work, bench.judge())
    bench.server.clear_log()
    started = time.perf_counter()
    first = bench.start(work, judges, "same")
    while not list(work.replies.glob("*.parquet")):
        time.sleep(0.02)
    # Hold the first run mid-way while the second starts (think time changes no reply).
    persona = bench.server.judge.personas["bench"]
    bench.server.judge.personas["bench"] = persona.model_copy(update={"latency_ms": 3000})
    second = bench.start(work, judges, "same")
    output, _ = second.communicate()
    bench.server.judge.personas["bench"] = persona
    first.communicate()
    row.seconds = time.perf_counter() - started
    audit(row, work, "same", bench.server.request_log())
    refused = second.returncode == 2 and "being judged by another process" in output
    row.note = "second refused" if refused else f"second NOT refused: {output[-200:]}"
    return row


def corrupt(bench: Bench) -> Row:
    row = Row("corrupt reply file")
    work = bench.fresh("corrupt")
    judge = bench.judge(max_concurrency=max(2, bench.args.concurrency // 4))
    bench.server.set_faults(**NO_FAULTS)
    bench.run(work, "before", judge)
    files = sorted(work.replies.glob("*.parquet"), key=lambda p: p.stat().st_mtime)
    victim = files[0]
    broken = set(pq.read_table(victim, columns=["call_key"]).column("call_key").to_pylist())
    kept = {k: v for k, v in texts(work).items() if k not in broken}
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    bench.server.clear_log()
    started = time.perf_counter()
    counts = bench.run(work, "corrupt", judge)
    row.seconds = time.perf_counter() - started
    row.resent = counts["sent"]
    after = texts(work)
    row.lost = sum(after.get(k) != v for k, v in kept.items())
    audit(row, work, "corrupt", bench.server.request_log())
    quarantined = (work.quarantine / f"replies-{victim.name}").exists()
    row.note = f"{len(broken)} replies in the cut file; quarantined: {quarantined}"
    return row


def disk_full(bench: Bench) -> Row:
    """A run whose work dir's file system fills up mid-run (a tmpfs, a ballast file leaving
    the journal's reserve and a little more), then resumed once the ballast is gone: the
    stage stops at the first ENOSPC (exit 75) with every reply it received kept."""
    from tasks.judging.batches import journal_reserve
    from tasks.judging.request import JudgeRequest

    row = Row("disk full, resume")
    mount = bench.root / "small-disk"
    mount.mkdir()
    size_mb = 32
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mount)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        row.note = f"skipped: cannot mount a tmpfs here ({done.stderr.strip()})"
        return row
    try:
        work = WorkDir(mount / "work")
        for folder in ("manifests", "plans"):
            shutil.copytree(bench.template.root / folder, work.root / folder)
        judge = bench.judge()
        judges = bench.judges_file(work, judge)
        reserve = journal_reserve(JudgeRequest(work, "full", bench.plan_id, (judge,)))
        stat = os.statvfs(mount)
        ballast = mount / "ballast"
        # Room for the reserve and about a third of the replies' files and journal lines.
        ballast.write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - reserve - 200 * 1024))
        bench.server.set_faults(**NO_FAULTS)
        bench.server.clear_log()
        started = time.perf_counter()
        proc = bench.start(work, judges, "full")
        output, _ = proc.communicate()
        if proc.returncode != 75:
            raise SystemExit(f"disk full: exit {proc.returncode}, not 75:\n{output}")
        at_stop = len(bench.server.request_log())
        ballast.unlink()
        kept = texts(work)
        proc = bench.start(work, judges, "full")
        resumed, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"resumed disk-full run failed:\n{resumed}")
        row.seconds = time.perf_counter() - started
        row.resent = len(bench.server.request_log()) - at_stop
        row.lost = sum(texts(work).get(k) != v for k, v in kept.items())
        audit(row, work, "full", bench.server.request_log())
        line = next((x for x in output.splitlines() if "no space left" in x), output[-200:])
        row.note = f"{at_stop} requests before the stop; said: {line[:160]}..."
    finally:
        subprocess.run(["umount", str(mount)], check=False)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=40.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, default=SCENARIOS,
                        help="Run only these scenarios.")  # fmt: skip
    args = parser.parse_args()
    rng = random.Random(args.seed)
    from prefect.testing.utilities import prefect_test_harness

    persona = Persona(name="bench", skill=0.8, left_bias=0.2, tie_rate=0.1,
                      latency_ms=args.latency_ms)  # fmt: skip
    overall = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="judgeline-faults-") as tmp,
        SimJudgeServer([persona]) as server,
        prefect_test_harness(server_startup_timeout=180),
    ):
        bench = Bench(args, Path(tmp), server)
        print(f"{args.pairs} demo pairs, K = {args.k}, full grid: {bench.planned} planned calls "
              f"per scenario; judge latency {args.latency_ms:g} ms, concurrency "
              f"{args.concurrency}", flush=True)  # fmt: skip
        rows: list[Row] = []
        if "storms" in args.only:
            calm = storm(bench, "no faults", {}, max_retries=2)
            calm_rate = rate(bench.server.request_log(), bench.planned)
            rows.append(calm)
            rows.append(storm(bench, "429 on half, Retry-After 1", {"rate_429": 0.5},
                              max_retries=2))  # fmt: skip
            storm_log = bench.server.request_log()
            first_attempts = min(bench.planned, len(storm_log))
            storm_rate = rate(storm_log, first_attempts)
            rows.append(storm(bench, "5xx bursts (60%)", {"rate_5xx": 0.6}, max_retries=2))
            rows.append(storm(bench, "stalls past timeout", {"rate_stall": 0.3, "stall_s": 5.0},
                              max_retries=1, timeout_s=1.0))  # fmt: skip
            rows.append(storm(bench, "malformed bodies", {"rate_malformed": 0.5}, max_retries=1))
            rows.append(storm(bench, "truncated bodies", {"rate_truncated": 0.5}, max_retries=1))
            mixed = {"rate_429": 0.15, "rate_5xx": 0.15, "rate_stall": 0.1, "stall_s": 5.0,
                     "rate_malformed": 0.15, "rate_truncated": 0.15,
                     "retry_after_s": 0}  # fmt: skip
            rows.append(storm(bench, "mixed storm", mixed, max_retries=2, timeout_s=1.0))
        for scenario, signum in STOPS.items():
            if scenario in args.only:
                rows.append(crash(bench, args.kills, rng, signum))
        if "concurrent" in args.only:
            rows.append(concurrent(bench))
        if "same" in args.only:
            rows.append(same_run_id(bench))
        if "corrupt" in args.only:
            rows.append(corrupt(bench))
        if "full" in args.only:
            rows.append(disk_full(bench))
        print()
        print_rows(rows)
        if "storms" in args.only:
            print(f"\nrequest rate over the first {bench.planned} requests: "
                  f"{calm_rate:,.0f}/s without faults, {storm_rate:,.0f}/s under 429s "
                  f"(ratio {storm_rate / calm_rate:.2f}; the client backs off)")  # fmt: skip
        print("failed counts planned calls; resent counts distinct call keys (planned calls "
              "with equal texts share one key)")  # fmt: skip
        print(f"total wall time {time.perf_counter() - overall:.0f} s")


if __name__ == "__main__":
    main()
