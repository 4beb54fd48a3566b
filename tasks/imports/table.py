"""A generic judgments table (`.jsonl`, `.csv`/`.tsv`, `.parquet`): one row per judge reply.

A `--map` like `freeze --table` names the columns: the pair fields of `ColumnMapping`
(`pair_id` required here, `question`, `answer_a`, `answer_b`, optional `key`, `reference`,
`source`, `metadata`) and the judgment fields `reply` (the judge's text; null: the call
failed, the slot is `M`), either `left` (the identity shown left/first: `A` or `B`) or
`order` (`AB`/`BA`), optional `seed` (the repeat; default 0), `verdict` (the verdict the
table records, a slot label of the row's display: `Left`, `Right`, `Tie`, `Abstain`, any
case; empty or null: none) and `judge` (else `--judge` names it). The rows of one pair must
repeat the same pair texts. Each distinct seed value, in sorted order, is one seed of the
run (as one file of a repeated-run format is).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from schemas import Pair
from schemas.vocabulary import Order, SlotLabel
from tasks.errors import InputError
from tasks.hashing import canonical_json, sha256_bytes
from tasks.imports.records import ImportedFile, Judgment
from tasks.ingest.fields import LoadedPairs, read_bytes, shorten
from tasks.ingest.tables import ColumnMapping, read_table

__all__ = ["JUDGMENT_FIELDS", "read_judgment_table"]

JUDGMENT_FIELDS = ("reply", "left", "order", "seed", "verdict", "judge")
"""The `--map` fields of a judgments table besides the pair fields of `ColumnMapping`."""

CONVENTION = (
    "judgments table: each row's order is its 'order' column (AB: identity A shown first), or "
    "AB when its 'left' column is A and BA when it is B; its verdict is about its own slots"
)
_ORDER_OF_LEFT: dict[str, Order] = {"A": "AB", "B": "BA"}
_ORDERS: dict[str, Order] = {"AB": "AB", "BA": "BA"}
_VERDICTS: dict[str, SlotLabel] = {
    "left": "Left",
    "right": "Right",
    "tie": "Tie",
    "abstain": "Abstain",
}


def _split_mapping(spec: str) -> tuple[ColumnMapping, dict[str, str]]:
    """The pair mapping (judgment columns read as metadata) and the judgment columns."""
    judgment: dict[str, str] = {}
    rest: list[str] = []
    for item in spec.split(","):
        field, eq, column = (s.strip() for s in item.partition("="))
        if field in JUDGMENT_FIELDS and eq and column:
            if field in judgment:
                raise InputError(f"column mapping {spec!r}: field {field!r} given twice")
            judgment[field] = column
        elif item.strip():
            rest.append(item)
    pair = ColumnMapping.parse(",".join(rest))
    if pair.pair_id is None or "reply" not in judgment:
        raise InputError(f"column mapping {spec!r}: a judgments table needs pair_id and reply")
    if ("left" in judgment) == ("order" in judgment):
        raise InputError(
            f"column mapping {spec!r}: give exactly one of left (identity shown first) or order"
        )
    extra = tuple(c for c in judgment.values() if c not in pair.metadata)
    return replace(pair, metadata=pair.metadata + extra), judgment


def _order(value: Any, cols: dict[str, str], *, path: Path, row: int) -> Order:
    field = "left" if "left" in cols else "order"
    table = _ORDER_OF_LEFT if field == "left" else _ORDERS
    text = value.strip().upper() if isinstance(value, str) else value
    if text not in table:
        raise InputError(
            f"{field} (column {cols[field]!r}) must be one of {', '.join(table)}, "
            f"got {shorten(value)}",
            file=str(path),
            row=row,
        )
    return table[text]


def _seed(value: Any, column: str, *, path: Path, row: int) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise InputError(
            f"seed (column {column!r}) must be an integer, got {shorten(value)}",
            file=str(path),
            row=row,
        ) from None


def read_judgment_table(
    path: str | Path,
    spec: str,
    *,
    judge: str | None = None,
    template: str = "arena-hard-v1",
    dataset: str | None = None,
) -> list[ImportedFile]:
    """One `ImportedFile` per seed of the table (sorted seed values: run seeds 0, 1, ...)."""
    from tasks.prompts.templates import get_template

    get_template(template)
    path = Path(path)
    mapping, cols = _split_mapping(spec)
    loaded = read_table(path, mapping, dataset=dataset)
    pairs: dict[str, tuple[Pair, int]] = {}
    by_seed: dict[int, list[Judgment]] = defaultdict(list)
    judges: set[str] = set()
    for index, (pair, row) in enumerate(zip(loaded.pairs, loaded.rows, strict=True)):
        meta = json.loads(pair.metadata)
        cells = {field: meta.pop(column, None) for field, column in cols.items()}
        pair = pair.model_copy(update={"metadata": canonical_json(meta)})
        first = pairs.setdefault(pair.pair_id, (pair, row))
        if first[0] != pair:
            raise InputError(
                f"pair {pair.pair_id} has other texts than on row {first[1]}: the rows of one "
                "pair must repeat its question and answers byte for byte",
                file=str(path),
                row=row,
            )
        name = cells.get("judge") if "judge" in cols else judge
        if not isinstance(name, str) or not name:
            raise InputError(
                "no judge: map a judge column or name the judge with --judge",
                file=str(path),
                row=row,
            )
        judges.add(name)
        reply = cells["reply"]
        if reply is not None and not isinstance(reply, str):
            raise InputError(
                f"reply (column {cols['reply']!r}) must be text or null, got {shorten(reply)}",
                file=str(path),
                row=row,
            )
        verdict = cells.get("verdict")
        label = _VERDICTS.get(verdict.strip().casefold()) if isinstance(verdict, str) else None
        if verdict not in (None, "") and label is None:
            raise InputError(
                f"verdict (column {cols['verdict']!r}) must be Left, Right, Tie, Abstain or "
                f"empty, got {shorten(verdict)}",
                file=str(path),
                row=row,
            )
        seed = _seed(cells["seed"], cols["seed"], path=path, row=row) if "seed" in cols else 0
        by_seed[seed].append(
            Judgment(
                pair_id=pair.pair_id,
                order=_order(cells.get("left", cells.get("order")), cols, path=path, row=row),
                reply=reply,
                recorded_verdict=verdict or None,
                recorded_label=label if reply is not None else None,
                line=row,
                index=index,
            )
        )
    if len(judges) != 1:
        raise InputError(
            f"one judge per table: found judge {sorted(judges) or 'none'}", file=str(path)
        )
    (judge_name,) = judges
    kept = LoadedPairs([p for p, _ in pairs.values()], [r for _, r in pairs.values()])
    sha = sha256_bytes(read_bytes(path))
    return [
        ImportedFile(
            tool="table",
            path=path,
            sha256=sha,
            judge=judge_name,
            config="table",
            template_id=template,
            convention=CONVENTION,
            pairs=kept,
            judgments=by_seed[seed],
            part=part,
        )
        for part, seed in enumerate(sorted(by_seed))
    ]
