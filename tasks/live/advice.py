"""A live run that follows advice (`live: {policy: advised, advised_by: RUN}`).

The live engine executes `paired_unanimity`. Advice for `paired_strict` is accepted too:
both policies reach the same decision on every draw (the strict boundary stops only once the
reference decision is settled), so the live decisions are the advised policy's and its
realised savings are a lower bound of the advised ones. Advice is followed only when it is
certified within its budget (docs/design.md#certificates). Any other advised policy, advice
that is not certified, or a judge configuration without advice, is refused before a call is
sent.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from schemas.judge import JudgeSpec
from tasks.errors import InputError
from tasks.runfolder import RunFolder
from tasks.workdir import WorkDir

__all__ = ["CERTIFIED", "EXECUTABLE", "advised_savings", "realised_against_advised"]

EXECUTABLE = ("paired_unanimity", "paired_strict")
"""Advised policies whose decisions the live engine (paired unanimity) reproduces."""
CERTIFIED = ("certified", "construction")
"""Certificates that let advice be followed."""


def advised_savings(
    work: WorkDir, advised_by: str, judges: list[JudgeSpec]
) -> dict[tuple[str, str], float]:
    """Advised savings per (judge, config) of the live run, once the advice is checked."""
    path = RunFolder(work, advised_by).table("advice")
    if not path.is_file():
        raise InputError(
            f"live policy advised: run {advised_by!r} has no advice ({path}); run "
            f"`judgeline advise {advised_by} --max-change 1%` first"
        )
    table = pq.read_table(path)
    if "certificate" not in table.column_names:
        raise InputError(
            f"live policy advised: the advice of run {advised_by!r} ({path}) was written before "
            f"advice was certified; run `judgeline advise {advised_by} --max-change 1%` again"
        )
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
