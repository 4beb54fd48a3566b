"""Advice drawn from a full-grid run (`judgeline advise`), and a live run that follows it
(`live: {policy: advised, advised_by: RUN, max_change: 1%}`).

A live run follows what `judgeline advise RUN --max-change 1%` prints: the advice drawn
afresh from RUN's outcomes at the budget and level of the live run's own configuration.
`advise` writes nothing, so no other command changes what a live run executes; the live run
keeps the advice it followed as its own `advice.parquet`.

The live engine executes `paired_unanimity`. Advice for `paired_strict` is accepted too:
both policies reach the same decision on every draw (the strict boundary stops only once the
reference decision is settled), so the live decisions are the advised policy's and its
realised savings are a lower bound of the advised ones. Advice is followed only when it is
certified within its budget (docs/design.md#certificates). Any other advised policy, advice
that is not certified, or a judge configuration without advice, is refused before a call is
sent.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from schemas.config import LiveSpec
from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.runs.folder import RunFolder, check_run_id
from tasks.storage import write_parquet_atomic
from tasks.store.workdir import WorkDir

__all__ = [
    "CERTIFIED",
    "DEFAULT_LEVEL",
    "EXECUTABLE",
    "advised_savings",
    "follow_advice",
    "live_advice",
    "realised_against_advised",
    "run_advice",
]

EXECUTABLE = ("paired_unanimity", "paired_strict")
"""Advised policies whose decisions the live engine (paired unanimity) reproduces."""
CERTIFIED = ("certified", "construction")
"""Certificates that let advice be followed."""
DEFAULT_LEVEL = 0.95
"""The certificates' confidence when the configuration names none (as `judgeline advise`)."""


def run_advice(
    work: WorkDir, run_id: str, *, max_change: float, level: float = DEFAULT_LEVEL
) -> pa.Table:
    """The advice (AdviceRow, every policy) for a full-grid run, from its outcomes; nothing
    is written."""
    from tasks.replay.advisor import advise
    from tasks.replay.grid import read_replay_input

    folder = RunFolder(work, check_run_id(run_id))
    where = work.location(folder.outcomes)
    if folder.live_summary.is_file():
        from tasks.live.runs import find_reference_run

        reference = find_reference_run(work, run_id)
        raise InputError(
            f"run {run_id!r} ran a stopping policy live: its outcomes hold the calls it made, "
            "not the full grid of K seeds in both orders that advice is drawn from; advise a "
            "full-grid run of the same plan and judges"
            + (f", such as {reference!r}" if reference else " (none is in this work dir)")
        )
    if not folder.outcomes.is_file():
        raise InputError(f"run {run_id!r} has no outcomes ({where}); remap it first")
    return advise(read_replay_input(folder.outcomes), max_change=max_change, level=level,
                  where=where)  # fmt: skip


def live_advice(
    work: WorkDir, live: LiveSpec, judges: list[JudgeSpec]
) -> tuple[pa.Table, dict[tuple[str, str], float]]:
    """The advice a live run of `live` would follow, drawn for `live.advised_by` at the
    configuration's budget and level, and its advised savings per (judge, config), once
    checked (`tasks.runs.preflight.check_run` refuses a run whose advice cannot be followed)."""
    assert live.advised_by is not None and live.max_change is not None
    level = DEFAULT_LEVEL if live.level is None else live.level
    try:
        table = run_advice(work, live.advised_by, max_change=live.max_change, level=level)
    except InputError as exc:
        raise InputError(f"live policy advised (advised_by): {exc}") from None
    return table, advised_savings(table, live.advised_by, judges)


def follow_advice(
    work: WorkDir, run_id: str, live: LiveSpec, judges: list[JudgeSpec]
) -> dict[tuple[str, str], float]:
    """The advice live run `run_id` follows (`live_advice`), kept as its `advice.parquet`;
    returns its advised savings per (judge, config)."""
    table, savings = live_advice(work, live, judges)
    write_parquet_atomic(table, RunFolder(work, run_id).table("advice"), overwrite=True)
    return savings


def advised_savings(
    table: pa.Table, advised_by: str, judges: list[JudgeSpec]
) -> dict[tuple[str, str], float]:
    """Advised savings per (judge, config) of the live run, once the advice is checked."""
    advice = {(r["judge"], r["config"]): r for r in table.to_pylist() if r["rank"] == "advised"}
    savings = {}
    for judge in judges:
        for config in judge.configs:
            row = advice.get((judge.name, config.name))
            where = f"judge {judge.name!r} config {config.name!r}"
            if row is None:
                raise InputError(
                    f"live policy advised: run {advised_by!r} has no advice for {where}"
                )
            if row["policy"] not in EXECUTABLE:
                raise InputError(
                    f"live policy advised: run {advised_by!r} advises {row['policy']} "
                    f"for {where}; the live engine executes paired_unanimity, which reproduces "
                    "only paired_unanimity or paired_strict advice"
                )
            if row["certificate"] not in CERTIFIED:
                raise InputError(
                    f"live policy advised: run {advised_by!r} advises {row['policy']} for {where} "
                    f"without a certificate ({row['certificate']}: bound "
                    f"{row['change_bound']:.2%} against the {row['max_change']:.2%} budget); "
                    "only certified advice is followed"
                )
            savings[(judge.name, config.name)] = float(row["savings"])
    return savings


def realised_against_advised(folder: RunFolder, advised: dict[tuple[str, str], float]) -> list[str]:
    """One line per group of a finished live run: realised savings beside the advised ones."""
    lines = []
    for row in pq.read_table(folder.live_summary).to_pylist():
        expected = advised.get((row["judge"], row["config"]))
        if expected is not None:
            lines.append(
                f"{row['judge']}/{row['config']}/{row['dataset']}: realised savings "
                f"{row['realised_savings']:.1%} against advised {expected:.1%}"
            )
    return lines
