"""Leaderboards: many systems ranked against one baseline, per judge config, from a run's
outcomes (docs/design.md#leaderboards).

`battles` reads a run's outcomes as games between the systems its manifest froze, under
each counting rule; `bt` fits Bradley-Terry by maximum likelihood and refits it per
bootstrap replicate; `style` holds the style covariates; `board` makes one rule's table;
`leaderboard_of` (here) makes every judge config's tables and flags the ranks the rules
disagree on. A leaderboard is a view: it reads stored tables and writes nothing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tasks.errors import InputError
from tasks.ingest.manifest import read_manifest
from tasks.leaderboard.battles import RULES, Battles, Rule, battles_of, manifest_systems
from tasks.leaderboard.board import BoardOptions, Scored, score_rule
from tasks.leaderboard.stopping import stopping_effects
from tasks.leaderboard.style import AnswerStats
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

__all__ = ["RULES", "BoardOptions", "Rule", "leaderboard_of", "rank_flags", "run_leaderboard"]


def rank_flags(tables: dict[str, Scored], main: str) -> list[dict[str, Any]]:
    """Each system whose rank differs between rules: its rank per rule, and each system it
    swaps places with between two rules, with whether their intervals (under `main`)
    overlap."""
    ranks = {rule: {r["system"]: r["rank"] for r in t.rows} for rule, t in tables.items()}
    inf = float("inf")
    bounds = {
        r["system"]: (-inf if r["lower"] is None else r["lower"],
                      inf if r["upper"] is None else r["upper"])
        for r in tables[main].rows
    }  # fmt: skip
    # A rank not identified (style control confounded with the systems) is not compared.
    systems = sorted(s for s in bounds if all(ranks[rule][s] is not None for rule in tables))
    flags = []
    for system in systems:
        per_rule = {rule: ranks[rule][system] for rule in tables}
        if len(set(per_rule.values())) == 1:
            continue
        swapped = []
        for other in systems:
            if other == system:
                continue
            signs = {np.sign(ranks[rule][system] - ranks[rule][other]) for rule in tables}
            if len(signs) > 1:
                low, high = bounds[system]
                o_low, o_high = bounds[other]
                swapped.append(
                    {"system": other, "intervals_overlap": bool(low <= o_high and o_low <= high)}
                )
        flags.append({"system": system, "ranks": per_rule, "swapped_with": swapped})
    return flags


def leaderboard_of(
    outcomes: pd.DataFrame,
    manifest: pa.Table,
    options: BoardOptions,
    rule: Rule = "reference",
    replayed: tuple[pd.DataFrame, pd.DataFrame] | None = None,
) -> list[dict[str, Any]]:
    """Per judge config: the systems under `rule` and under every rule, rank flags and,
    given the run's (replay, design) tables, what each stopping policy does to the ranks."""
    if rule not in RULES:
        raise InputError(f"unknown rule {rule!r}; expected one of {', '.join(RULES)}")
    answers = None
    if options.style_control or options.length_control:
        answers = AnswerStats.of(
            (manifest.column("answer_a").to_pylist(), manifest.column("answer_b").to_pylist())
        )
    boards = []
    # Controlled fits refit every pair per replicate: the other rules' tables give their
    # scores and ranks (for the rank flags) without intervals.
    others = replace(options, replicates=0) if answers is not None else options
    for battles in battles_of(outcomes, manifest):
        tables = {r: score_rule(battles, r, options if r == rule else others, answers)
                  for r in RULES}  # fmt: skip
        board = _board(battles, tables, rule, options)
        if replayed is not None:
            mine = (outcomes["judge"] == battles.judge) & (outcomes["config"] == battles.config)
            k = int(outcomes.loc[mine, "seed"].nunique())
            board["stopping"] = stopping_effects(battles, board["baseline"], *replayed, k)
        boards.append(board)
    return boards


def _board(
    battles: Battles, tables: dict[Rule, Scored], rule: Rule, options: BoardOptions
) -> dict[str, Any]:
    main = tables[rule]
    return {
        "judge": battles.judge,
        "config": battles.config,
        "baseline": main.baseline,
        "rule": rule,
        "questions": main.questions,
        "replicates": options.replicates,
        "confidence": options.confidence,
        "style_control": options.style_control,
        "length_control": options.length_control,
        "systems": main.rows,
        "style": main.style,
        "style_check": main.style_check,
        "length": main.length,
        "rules": {
            r: {
                "systems": t.rows,
                "style": t.style,
                "style_check": t.style_check,
                "length": t.length,
            }
            for r, t in tables.items()
        },  # fmt: skip
        "rank_flags": rank_flags({str(r): t for r, t in tables.items()}, rule),
    }


def run_leaderboard(
    work: WorkDir, run_id: str, options: BoardOptions, rule: Rule = "reference"
) -> dict[str, Any]:
    """A run's leaderboards, from its outcomes and its frozen manifest."""
    folder = RunFolder(work, run_id)
    record = folder.read_record()
    if record.manifest_hash is None or not folder.outcomes.is_file():
        raise InputError(
            f"run {run_id!r} has no outcomes to rank (status {record.status}); a leaderboard "
            "reads a run that finished its remap"
        )
    _, manifest = read_manifest(work, record.manifest_hash, gate=False)
    manifest_systems(manifest)  # pairs of no systems: refused before the tables are read
    outcomes = pd.read_parquet(
        folder.outcomes,
        columns=["judge", "config", "pair_id", "seed", "order", "outcome", "strength"],
    )
    replayed = None
    if folder.table("replay").is_file() and folder.table("design").is_file():
        replayed = (
            pd.read_parquet(folder.table("replay")),
            pd.read_parquet(folder.table("design")),
        )
    return {
        "run_id": run_id,
        "options": asdict(options),
        "boards": _finite(leaderboard_of(outcomes, manifest, options, rule, replayed)),
    }


def _finite(value: Any) -> Any:
    """The value with NaN and infinities (a win rate of a system that never met the
    baseline, an interval's open end) as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
