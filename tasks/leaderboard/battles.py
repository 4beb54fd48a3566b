"""A run's outcomes as games between systems, under each counting rule.

The system behind identity A or B of a pair is the frozen manifest's (`model_a`,
`model_b` in the pair's metadata, part of the manifest hash); an outcome names an identity
through the presentation map (docs/design.md#remapping-identities). Nothing a judge wrote
names a system. A pair's question is its metadata's `question_id` (else its question
text): the unit the bootstrap resamples, all of a question's pairs (and turns), seeds and
orders together.

Counting rules (docs/design.md#leaderboards), per pair, seed `s` judged in both orders:

- `reference`: the decision of the two outcomes (#A > #B: A wins; #B > #A: B wins; else a
  tie), judgeline's two-order disposition: an order conflict is a tie. A (pair, seed) with
  no valid outcome (`A`, `B` or `T`) is no game.
- `drop-conflicts`: the same, with order conflicts left out.
- `per-order`: each valid call is a game of its own, as Arena-Hard-Auto counts its two
  games: a strong verdict (`>>`) weighs 3, a weak one 1, a tie 1, half to each side.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
from numpy.typing import NDArray

from tasks.errors import InputError

__all__ = [
    "RULES", "STRONG_WEIGHT", "Battles", "Games", "Rule", "battles_of", "conflicts_per_pair",
    "games_under",
]  # fmt: skip

Rule = Literal["reference", "drop-conflicts", "per-order"]
RULES: tuple[Rule, ...] = ("reference", "drop-conflicts", "per-order")
STRONG_WEIGHT = 3.0
"""Weight of a strong verdict under `per-order` (Arena-Hard-Auto's `WEIGHT`)."""


@dataclass(frozen=True)
class Battles:
    """One judge config's calls, per (pair, seed): the pair's systems and question, and the
    outcome (and verdict strength) of each display order."""

    judge: str
    config: str
    systems: list[str]
    baseline: str | None
    """The one system the manifest names as baseline (`role_a`/`role_b`), if one."""
    questions: list[str]
    pair_ids: list[str]
    pair_a: NDArray[np.int64]
    """Per pair: index into `systems` of identity A's system (B's: `pair_b`)."""
    pair_b: NDArray[np.int64]
    pair_question: NDArray[np.int64]
    pair: NDArray[np.int64]
    """Per (pair, seed) row: index of its pair; `ab`, `ba` its outcomes, `*_strong` their
    verdict strength."""
    ab: NDArray[np.str_]
    ba: NDArray[np.str_]
    ab_strong: NDArray[np.bool_]
    ba_strong: NDArray[np.bool_]


@dataclass(frozen=True)
class Games:
    """Per pair of `Battles`, under one rule: the weighted games A won (`won`) and lost
    (`lost`), ties counted half to each, and the unweighted wins, ties and losses of A."""

    won: NDArray[np.float64]
    lost: NDArray[np.float64]
    wins: NDArray[np.int64]
    ties: NDArray[np.int64]
    losses: NDArray[np.int64]


def manifest_systems(manifest: pa.Table) -> tuple[list[str], list[str], str | None]:
    """Per pair of a manifest, the systems of identities A and B, and the baseline if one
    is named; InputError if a pair names no system (a manifest of answer pairs only)."""
    pairs = manifest.select(["pair_id", "metadata"]).to_pydict()
    return _systems(_parsed(pairs["metadata"]), pairs["pair_id"])


def _parsed(metadata: list[str]) -> list[dict[str, Any]]:
    return [json.loads(text) if text else {} for text in metadata]


def _systems(
    metadata: list[dict[str, Any]], pair_ids: list[str]
) -> tuple[list[str], list[str], str | None]:
    a_names, b_names, baselines = [], [], set()
    for pair_id, meta in zip(pair_ids, metadata, strict=True):
        a, b = meta.get("model_a"), meta.get("model_b")
        baselines |= {meta.get(f"model_{s}") for s in "ab" if meta.get(f"role_{s}") == "baseline"}
        if not isinstance(a, str) or not isinstance(b, str) or not a or not b:
            raise InputError(
                f"pair {pair_id!r} names no system for identity A or B (model_a, model_b in "
                "its metadata): a leaderboard ranks the systems a manifest froze; freeze the "
                "answers with `judgeline freeze --answers FILE --baseline NAME`"
            )
        if a == b:
            raise InputError(f"pair {pair_id!r} pairs system {a!r} with itself")
        a_names.append(a)
        b_names.append(b)
    named = [b for b in baselines if isinstance(b, str)]
    return a_names, b_names, named[0] if len(named) == 1 else None


def _question_key(dataset: str, question: str, metadata: dict[str, Any]) -> str:
    """What the bootstrap draws: the pair's dataset and `question_id` (its turns and every
    system's pair together), else its question text."""
    qid = metadata.get("question_id")
    if qid is not None:
        return "id:" + json.dumps([dataset, qid])
    return "text:" + hashlib.sha256(question.encode("utf-8")).hexdigest()


def _strong(wide: pd.DataFrame, order: str) -> NDArray[np.bool_]:
    if ("strength", order) not in wide:
        return np.zeros(len(wide), dtype=bool)
    return np.asarray(wide[("strength", order)].to_numpy() == "strong", dtype=bool)


def battles_of(outcomes: pd.DataFrame, manifest: pa.Table) -> list[Battles]:
    """The battles of every (judge, config) of a run's outcomes over its manifest."""
    pairs = manifest.select(["pair_id", "dataset", "question", "metadata"]).to_pydict()
    metadata = _parsed(pairs["metadata"])
    a_names, b_names, baseline = _systems(metadata, pairs["pair_id"])
    systems = sorted({*a_names, *b_names})
    system_index = {s: i for i, s in enumerate(systems)}
    digests = [
        _question_key(d, q, m)
        for d, q, m in zip(pairs["dataset"], pairs["question"], metadata, strict=True)
    ]
    questions = sorted(set(digests))
    question_index = {q: i for i, q in enumerate(questions)}
    pair_index = {p: i for i, p in enumerate(pairs["pair_id"])}
    pair_a = np.array([system_index[s] for s in a_names], dtype=np.int64)
    pair_b = np.array([system_index[s] for s in b_names], dtype=np.int64)
    pair_question = np.array([question_index[q] for q in digests], dtype=np.int64)

    frame = outcomes[["judge", "config", "pair_id", "seed", "order", "outcome", "strength"]]
    unknown = sorted(set(frame["pair_id"]) - set(pair_index))
    if unknown:
        raise InputError(f"outcomes name pairs the manifest lacks: {unknown[:5]}")
    result = []
    for (judge, config), group in frame.groupby(["judge", "config"], sort=True):
        wide = group.pivot_table(
            index=["pair_id", "seed"], columns="order", values=["outcome", "strength"],
            aggfunc="first",
        )  # fmt: skip
        if ("outcome", "AB") not in wide or ("outcome", "BA") not in wide:
            raise InputError(f"judge {judge} · config {config}: both display orders are needed")
        keys = wide.index.get_level_values("pair_id")
        ab = wide[("outcome", "AB")].fillna("M").to_numpy(dtype=str)
        ba = wide[("outcome", "BA")].fillna("M").to_numpy(dtype=str)
        result.append(
            Battles(
                judge=str(judge), config=str(config), systems=systems, baseline=baseline,
                questions=questions,
                pair_ids=list(pairs["pair_id"]), pair_a=pair_a, pair_b=pair_b,
                pair_question=pair_question,
                pair=np.array([pair_index[p] for p in keys], dtype=np.int64),
                ab=ab, ba=ba,
                ab_strong=_strong(wide, "AB"), ba_strong=_strong(wide, "BA"),
            )
        )  # fmt: skip
    return result


def games_under(battles: Battles, rule: Rule) -> Games:
    """The games of each pair under `rule` (module docstring)."""
    if rule not in RULES:
        raise InputError(f"unknown rule {rule!r}; expected one of {', '.join(RULES)}")
    if rule == "per-order":
        outcomes = np.concatenate([battles.ab, battles.ba])
        strong = np.concatenate([battles.ab_strong, battles.ba_strong])
        rows = np.concatenate([battles.pair, battles.pair])
        a_won, b_won, tied = outcomes == "A", outcomes == "B", outcomes == "T"
        weight = np.where(strong & ~tied, STRONG_WEIGHT, 1.0)  # a tie weighs 1, always
    else:
        votes_a = (battles.ab == "A").astype(int) + (battles.ba == "A")
        votes_b = (battles.ab == "B").astype(int) + (battles.ba == "B")
        valid = np.isin(battles.ab, ("A", "B", "T")) | np.isin(battles.ba, ("A", "B", "T"))
        if rule == "drop-conflicts":
            valid &= ~((votes_a == 1) & (votes_b == 1))
        rows = battles.pair
        weight = np.ones(len(rows))
        a_won, b_won = valid & (votes_a > votes_b), valid & (votes_b > votes_a)
        tied = valid & (votes_a == votes_b)
    count = len(battles.pair_a)

    def total(mask: NDArray[np.bool_], values: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.bincount(rows[mask], weights=values[mask], minlength=count).astype(float)

    ties = total(tied, weight)
    return Games(
        won=total(a_won, weight) + ties / 2,
        lost=total(b_won, weight) + ties / 2,
        wins=np.bincount(rows[a_won], minlength=count).astype(np.int64),
        ties=np.bincount(rows[tied], minlength=count).astype(np.int64),
        losses=np.bincount(rows[b_won], minlength=count).astype(np.int64),
    )


def conflicts_per_pair(battles: Battles) -> NDArray[np.int64]:
    """Order conflicts (both orders decisive, for different identities) of each pair."""
    conflict = ((battles.ab == "A") & (battles.ba == "B")) | (
        (battles.ab == "B") & (battles.ba == "A")
    )
    return np.bincount(battles.pair[conflict], minlength=len(battles.pair_a))
