"""Benchmark: `judgeline leaderboard` over 100 systems x 500 questions x K = 2 (1,000 bootstrap
replicates), against the anchors' method, a logistic regression refitted per replicate; and
`--style-control --length-control` at 50 and 100 systems.

Usage: .venv/bin/python bench/leaderboard.py [--systems N] [--questions Q] [--replicates R]
       [--baseline-replicates B] [--controlled-systems 50,100]

A work dir is staged (not timed): an answers table frozen as a manifest (each system paired
with the baseline on every question) and a run whose outcomes are drawn from a known
Bradley-Terry truth (both orders, K = 2, strong verdicts and ties), replayed under every
design and policy. Then, measured:

- the whole command, `judgeline leaderboard RUN --json`, in a fresh process (three rules,
  1,000 replicates each, and what each replayed policy does to the ranks): at most 10 s;
  its peak RSS is printed;
- one rule's scores and intervals in this process (`per-order`, Arena-Hard-Auto's counting)
  against Arena-Hard-Auto's bootstrap: each replicate resamples the battles and refits a
  logistic regression on the duplicated-battle win matrix (L-BFGS, as scikit-learn's
  default solver), B replicates timed and scaled to R: at least 10x faster;
- `judgeline leaderboard RUN --json --style-control --length-control` at 50 systems (at most
  10 s and 1 GiB peak RSS) and 100 systems (at most 20 s), each in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.optimize import minimize

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support import bare_record  # noqa: E402

from tasks.ingest.answers import read_answers  # noqa: E402
from tasks.ingest.manifest import freeze_manifest, read_manifest  # noqa: E402
from tasks.leaderboard.battles import battles_of  # noqa: E402
from tasks.leaderboard.board import BoardOptions, score_rule  # noqa: E402
from tasks.replay.stream import replay_file  # noqa: E402
from tasks.runs.folder import RunFolder  # noqa: E402
from tasks.runs.record import write_record  # noqa: E402
from tasks.store.workdir import WorkDir  # noqa: E402

COMMAND_LIMIT_S = 10.0
SPEEDUP_TARGET = 10.0
CONTROLLED_LIMITS = {50: (10.0, 1024.0), 100: (20.0, None)}
"""Systems: (seconds, MiB of peak RSS) for the controlled command."""
_PEAK = (
    "import resource, sys\n"
    "from flows.entry import main\n"
    "sys.argv = ['judgeline', *sys.argv[1:]]\n"
    "try:\n    main()\n"
    "finally:\n"
    "    print('peak_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n"
)


def stage(root: Path, systems: int, questions: int, k: int, seed: int) -> tuple[WorkDir, str]:
    """The answers frozen as a manifest and a run `bench` of simulated outcomes."""
    rng = np.random.default_rng(seed)
    names = ["base", *(f"sys{i:03d}" for i in range(1, systems))]
    answers = root / "answers.jsonl"
    with answers.open("w", encoding="utf-8") as out:
        for q in range(questions):
            for name in names:
                answer = f"{name} answers {q}" + " more" * int(rng.integers(0, 40))
                answer += "\n- a point" * int(rng.integers(0, 4))
                answer += " **bold**" * int(rng.integers(0, 2))
                row = {"question_id": f"q{q}", "question": f"Question {q}?", "system": name,
                       "answer": answer}  # fmt: skip
                out.write(json.dumps(row) + "\n")
    work = WorkDir(root / "work")
    loaded = read_answers(answers, baseline="base")
    frozen = freeze_manifest([(str(answers), loaded.pairs, loaded.rows)], work)
    _, manifest = read_manifest(work, frozen.info.manifest_hash, gate=False)
    truth = dict(zip(names, np.r_[0.0, rng.normal(0, 0.8, systems - 1)], strict=True))
    meta = [json.loads(m) for m in manifest.column("metadata").to_pylist()]
    edge = np.array([truth[m["model_a"]] - truth[m["model_b"]] for m in meta])
    pair_ids = np.array(manifest.column("pair_id").to_pylist())
    shape = (len(pair_ids), k, 2)
    p = np.broadcast_to((1 / (1 + np.exp(-edge)))[:, None, None], shape)
    draw = rng.random(shape)
    outcome = np.where(draw < 0.08, "T", np.where(rng.random(shape) < p, "A", "B"))
    strength = np.where(outcome == "T", None, np.where(rng.random(shape) < 0.4, "strong", "weak"))
    table = pa.table({
        "judge": ["sim"] * outcome.size, "config": ["default"] * outcome.size,
        "dataset": ["answers"] * outcome.size,
        "pair_id": np.repeat(pair_ids, 2 * k),
        "seed": np.tile(np.repeat(np.arange(k), 2), len(pair_ids)),
        "order": np.tile(["AB", "BA"], len(pair_ids) * k),
        "outcome": outcome.ravel(), "key": pa.nulls(outcome.size, pa.string()),
        "strength": strength.ravel(),
    })  # fmt: skip
    folder = RunFolder(work, "bench").create()
    pq.write_table(table, folder.outcomes)
    replay_file(folder.outcomes, folder.path)  # as the nightly flow does: every policy
    record = bare_record("bench").model_copy(update={"manifest_hash": frozen.info.manifest_hash})
    write_record(work, record)
    return work, frozen.info.manifest_hash


def anchors_bootstrap(games: pd.DataFrame, systems: list[str], replicates: int) -> float:
    """Arena-Hard-Auto's bootstrap (show_result.py): per replicate, the battles resampled
    with replacement, their win matrix (a win twice, a tie once to each side) and a
    logistic regression without intercept or penalty on it. Returns seconds."""
    index = {s: i for i, s in enumerate(systems)}
    a = games["model_a"].map(index).to_numpy()
    b = games["model_b"].map(index).to_numpy()
    winner = games["winner"].to_numpy()
    size, n = len(systems), len(games)
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(replicates):
        pick = rng.integers(0, n, n)
        ra, rb, rw = a[pick], b[pick], winner[pick]
        wins = np.zeros((size, size))
        np.add.at(wins, (ra[rw == "model_a"], rb[rw == "model_a"]), 2.0)
        np.add.at(wins, (rb[rw == "model_b"], ra[rw == "model_b"]), 2.0)
        np.add.at(wins, (ra[rw == "tie"], rb[rw == "tie"]), 1.0)
        np.add.at(wins, (rb[rw == "tie"], ra[rw == "tie"]), 1.0)
        i, j = np.nonzero(wins)
        x = np.zeros((len(i), size))
        x[np.arange(len(i)), i] = math.log(10)
        x[np.arange(len(i)), j] = -math.log(10)
        weight = wins[i, j]

        def loss(coef: np.ndarray, x: np.ndarray = x, weight: np.ndarray = weight) -> tuple:
            z = x @ coef
            value = float((weight * np.logaddexp(0, -z)).sum())
            return value, -(weight / (1 + np.exp(z))) @ x

        minimize(loss, np.zeros(size), jac=True, method="L-BFGS-B", options={"gtol": 1e-8})
    return time.perf_counter() - start


def arena_games(work: WorkDir, manifest_hash: str) -> tuple[pd.DataFrame, list[str]]:
    """The run's calls as Arena-Hard-Auto's battle rows (a strong verdict 3 rows)."""
    _, manifest = read_manifest(work, manifest_hash, gate=False)
    outcomes = pd.read_parquet(RunFolder(work, "bench").outcomes)
    meta = {r["pair_id"]: json.loads(r["metadata"]) for r in manifest.to_pylist()}
    valid = outcomes[outcomes["outcome"].isin(["A", "B", "T"])]
    repeat = np.where(valid["strength"] == "strong", 3, 1)
    rows = valid.loc[valid.index.repeat(repeat)]
    frame = pd.DataFrame({
        "model_a": [meta[p]["model_a"] for p in rows["pair_id"]],
        "model_b": [meta[p]["model_b"] for p in rows["pair_id"]],
        "winner": rows["outcome"].map({"A": "model_a", "B": "model_b", "T": "tie"}).to_numpy(),
    })  # fmt: skip
    return frame, sorted({*frame["model_a"], *frame["model_b"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=100)
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--baseline-replicates", type=int, default=20)
    parser.add_argument("--controlled-systems", default="50,100")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        work, manifest_hash = stage(Path(tmp), args.systems, args.questions, args.k, seed=1)
        env = {**os.environ, "JUDGELINE_WORKER": "0"}
        command = [
            str(REPO / ".venv" / "bin" / "judgeline"), "--work-dir", str(work.root),
            "leaderboard", "bench", "--json", "--replicates", str(args.replicates),
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        command_s = time.perf_counter() - start
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if done.returncode != 0:
            sys.exit(f"judgeline leaderboard failed:\n{done.stderr}")
        boards = json.loads(done.stdout)["boards"]
        _, manifest = read_manifest(work, manifest_hash, gate=False)
        outcomes = pd.read_parquet(RunFolder(work, "bench").outcomes)
        (battles,) = battles_of(outcomes, manifest)
        options = BoardOptions(replicates=args.replicates)
        start = time.perf_counter()
        score_rule(battles, "per-order", options, None)
        ours_s = time.perf_counter() - start
        games, systems = arena_games(work, manifest_hash)
        anchors_s = anchors_bootstrap(games, systems, args.baseline_replicates)
        anchors_full = anchors_s * args.replicates / args.baseline_replicates
    speedup = anchors_full / ours_s
    print(f"{args.systems} systems x {args.questions} questions x K={args.k}, "
          f"{len(outcomes)} outcomes, {args.replicates} replicates")  # fmt: skip
    print(
        f"judgeline leaderboard (3 rules, {len(boards[0]['systems'])} systems): "
        f"{command_s:.2f} s (limit {COMMAND_LIMIT_S:.0f} s), peak RSS {peak_mb:.0f} MB"
    )
    print(f"one rule in process: {ours_s:.3f} s; anchors' refit: {anchors_s:.2f} s for "
          f"{args.baseline_replicates} replicates, {anchors_full:.1f} s scaled to "
          f"{args.replicates}: {speedup:.0f}x (target {SPEEDUP_TARGET:.0f}x)")  # fmt: skip
    missed = command_s > COMMAND_LIMIT_S or speedup < SPEEDUP_TARGET
    for systems in [int(n) for n in args.controlled_systems.split(",") if n]:
        seconds, peak_mib = controlled(systems, args.questions, args.k, args.replicates)
        limit_s, limit_mib = CONTROLLED_LIMITS.get(systems, (None, None))
        print(
            f"--style-control --length-control, {systems} systems x {args.questions} questions "
            f"x {args.replicates} replicates: {seconds:.2f} s (limit {limit_s} s), peak RSS "
            f"{peak_mib:.0f} MiB (limit {limit_mib} MiB)"
        )
        missed |= limit_s is not None and seconds > limit_s
        missed |= limit_mib is not None and peak_mib > limit_mib
    print(f"load average after: {os.getloadavg()}")
    if missed:
        sys.exit("target missed")


def controlled(systems: int, questions: int, k: int, replicates: int) -> tuple[float, float]:
    """The whole `judgeline leaderboard --json --style-control --length-control` in a fresh
    process: (seconds, peak RSS in MiB)."""
    with tempfile.TemporaryDirectory() as tmp:
        work, _ = stage(Path(tmp), systems, questions, k, seed=2)
        env = {**os.environ, "JUDGELINE_WORKER": "0"}
        command = [
            str(REPO / ".venv" / "bin" / "python"), "-c", _PEAK, "--work-dir", str(work.root),
            "leaderboard", "bench", "--json", "--replicates", str(replicates),
            "--style-control", "--length-control",
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"judgeline leaderboard --style-control failed:\n{done.stderr}")
        peak = [line for line in done.stderr.splitlines() if line.startswith("peak_kib")]
        json.loads(done.stdout)
    return seconds, int(peak[-1].split()[1]) / 1024


if __name__ == "__main__":
    main()
