"""The report's tables as data for the table template; row order and grouping of frames."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel

from schemas.report import Show
from schemas.vocabulary import DESIGNS, POLICIES

GROUP = ("judge", "config", "dataset")
"""The columns naming one (judge, config, dataset) group: the report's row key."""


@dataclass(frozen=True)
class Col:
    """One table column: where its values come from and how they read."""

    key: str
    show: Show


def columns(model: type[BaseModel], frame: pd.DataFrame | None = None) -> list[Col]:
    """A table model's columns in order; an optional one only when `frame` has it."""
    cols = []
    for name, info in model.model_fields.items():
        show = next(m for m in info.metadata if isinstance(m, Show))
        if show.optional and (frame is None or name not in frame):
            continue
        cols.append(Col(name, show))
    return cols


@dataclass(frozen=True)
class Table:
    """What the table template draws: heading rows, body cells and the columns said once."""

    table_id: str
    constant: list[tuple[str, Any]]
    """(label, value) of key columns with one value in every row, said above the table."""
    groups: list[tuple[str, int]]
    """Group headings with their column spans; empty when no column has a group."""
    cols: list[Show]
    rows: list[list[tuple[Show, Any]]]
    """Per row, each column with its value: raw for text, else a float or None (blank)."""


def _number(value: Any) -> float | None:
    number = float(value) if value is not None and not pd.isna(value) else math.nan
    return None if math.isnan(number) else number


def table(frame: pd.DataFrame, cols: Sequence[Col], *, table_id: str) -> Table:
    """The table of `frame`'s rows under `cols`."""
    # A key column with one value for every row (often the dataset) costs width a laptop
    # screen lacks: state it once above the table instead.
    constant = [
        c
        for c in cols
        if c.key in GROUP and len(frame) > 1 and frame[c.key].astype(str).nunique() == 1
    ]
    cols = [c for c in cols if c not in constant]
    groups: list[tuple[str, int]] = []
    for col in cols:
        if groups and groups[-1][0] == col.show.group:
            groups[-1] = (col.show.group, groups[-1][1] + 1)
        else:
            groups.append((col.show.group, 1))
    rows = [
        [
            (c.show, rec.get(c.key) if c.show.kind == "text" else _number(rec.get(c.key)))
            for c in cols
        ]
        for rec in frame.to_dict("records")
    ]
    return Table(
        table_id=table_id,
        constant=[(c.show.label.lower(), frame[c.key].iloc[0]) for c in constant],
        groups=groups if any(g for g, _ in groups) else [],
        cols=[c.show for c in cols],
        rows=rows,
    )


def _natural_key(text: str) -> tuple[str | int, ...]:
    # "cfg-r2" before "cfg-r10": digit runs compare as numbers. re.split with a group
    # alternates text and digits, so equal positions always hold the same type.
    parts = re.split(r"(\d+)", text)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def _natural_ranks(texts: list[str]) -> list[int]:
    """Each text's place in natural order (equal texts, equal places; "a01" before "a1")."""
    rank = {v: i for i, v in enumerate(sorted(set(texts), key=lambda t: (_natural_key(t), t)))}
    return [rank[t] for t in texts]


def _vocabulary_ranks(vocab: Sequence[str]) -> Callable[[list[str]], list[int]]:
    """Each text's place in `vocab`; anything else after it."""
    rank = {v: i for i, v in enumerate(vocab)}
    return lambda texts: [rank.get(t, 99) for t in texts]


_RANKS = {"design": _vocabulary_ranks(DESIGNS), "policy": _vocabulary_ranks(POLICIES)}


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in a fixed order whatever the input order: the report must be deterministic."""
    if frame.empty:
        return frame.reset_index(drop=True)
    keys = [c for c in (*GROUP, "design", "policy", "component", "pair_id") if c in frame]
    # Each key column ranked over its distinct values only, then one stable sort of the
    # rows by those ranks (np.lexsort takes the last key first).
    ranks = []
    for key in keys:
        codes, values = pd.factorize(frame[key], use_na_sentinel=False)
        place = _RANKS.get(key, _natural_ranks)([str(v) for v in values])
        ranks.append(np.asarray(place, dtype=np.int64)[codes])
    return frame.take(np.lexsort(ranks[::-1])).reset_index(drop=True)


def present(
    frames: pd.DataFrame | Sequence[pd.DataFrame], col: str, vocab: Sequence[str]
) -> list[str]:
    """The values of `col` in the frame (or any of the frames), those of `vocab` first in
    its order, then the others sorted."""
    every = [frames] if isinstance(frames, pd.DataFrame) else frames
    seen = {v for frame in every if not frame.empty for v in frame[col].astype(str)}
    return [v for v in vocab if v in seen] + sorted(seen - set(vocab))


GroupKey = tuple[str, str, str]


def group_rows(frame: pd.DataFrame) -> dict[GroupKey, list[dict[str, Any]]]:
    """Records per (judge, config, dataset), in the frame's order.

    One `to_dict` for the whole frame: per-group pandas calls cost ~10 ms each, which
    adds up to seconds at a paper-sized run (hundreds of groups).
    """
    out: dict[GroupKey, list[dict[str, Any]]] = {}
    for rec in frame.to_dict("records"):
        key = (str(rec["judge"]), str(rec["config"]), str(rec["dataset"]))
        out.setdefault(key, []).append({str(k): v for k, v in rec.items()})
    return out


def row_title(key: tuple[str, str, str]) -> tuple[str, str]:
    return key[0], f"{key[1]} · {key[2]}"
