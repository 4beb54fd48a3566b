"""The report's HTML building blocks: formatted, sortable tables, legends and sections."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd

from schemas.vocabulary import DESIGNS, POLICIES
from tasks.report.charts import esc, pct, signed_pct

GROUP = ("judge", "config", "dataset")
"""The columns naming one (judge, config, dataset) group: the report's row key."""


Kind = Literal["text", "int", "pct", "pct2", "score", "calls", "extra", "var"]


@dataclass(frozen=True)
class Col:
    """One table column: where its values come from and how they read."""

    key: str
    label: str
    kind: Kind = "text"
    group: str = ""
    bar: bool = False
    tip: str = ""


def cell(value: Any, col: Col) -> str:
    if col.kind == "text":
        return f"<td>{esc(value)}</td>"
    number = float(value) if value is not None and not pd.isna(value) else math.nan
    if math.isnan(number):
        return '<td class="num" data-v="">—</td>'
    shown = {
        "int": lambda v: f"{round(v):,}",
        "pct": lambda v: pct(v, 1),
        "pct2": lambda v: pct(v, 2),
        "score": lambda v: f"{v:.3f}",
        "calls": lambda v: f"{v:.2f}",
        "extra": lambda v: signed_pct(v, 1),
        "var": lambda v: f"{v:.5f}",
    }[col.kind](number)
    style = f' style="--v:{min(max(number, 0.0), 1.0):.4f}"' if col.bar else ""
    cls = "num bar" if col.bar else "num"
    return f'<td class="{cls}" data-v="{number:.10g}"{style}>{shown}</td>'


def table(frame: pd.DataFrame, cols: Sequence[Col], *, table_id: str) -> str:
    # A key column with one value for every row (often the dataset) costs width a laptop
    # screen lacks: state it once above the table instead.
    constant = [
        c
        for c in cols
        if c.key in GROUP and len(frame) > 1 and frame[c.key].astype(str).nunique() == 1
    ]
    cols = [c for c in cols if c not in constant]
    note = ""
    if constant:
        said = "; ".join(f"{c.label.lower()} {esc(frame[c.key].iloc[0])}" for c in constant)
        note = f'<p class="note">Every row: {said}.</p>'
    groups: list[tuple[str, int]] = []
    for col in cols:
        if groups and groups[-1][0] == col.group:
            groups[-1] = (col.group, groups[-1][1] + 1)
        else:
            groups.append((col.group, 1))
    head = ""
    if any(g for g, _ in groups):
        head += (
            "<tr class='groups'>"
            + "".join(
                f'<th colspan="{n}" scope="colgroup" class="{"grp" if g else ""}">{esc(g)}</th>'
                for g, n in groups
            )
            + "</tr>"
        )
    head += (
        "<tr>"
        + "".join(
            f'<th scope="col" class="{"num" if c.kind != "text" else ""}"'
            + (f' title="{esc(c.tip)}"' if c.tip else "")
            + f">{esc(c.label)}</th>"
            for c in cols
        )
        + "</tr>"
    )
    body = "".join(
        "<tr>" + "".join(cell(rec.get(c.key), c) for c in cols) + "</tr>"
        for rec in frame.to_dict("records")
    )
    return (
        f'{note}<div class="table-wrap"><table class="sortable" id="{table_id}">'
        f"<thead>{head}</thead><tbody>{body}</tbody></table></div>"
    )


KEY_COLS = [Col("judge", "Judge"), Col("config", "Config"), Col("dataset", "Dataset")]


def _natural_key(text: str) -> tuple[str | int, ...]:
    # "cfg-r2" before "cfg-r10": digit runs compare as numbers. re.split with a group
    # alternates text and digits, so equal positions always hold the same type.
    parts = re.split(r"(\d+)", text)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def _natural_rank(values: pd.Series) -> pd.Series:
    texts = values.astype(str)
    rank = {v: i for i, v in enumerate(sorted(set(texts), key=_natural_key))}
    return texts.map(rank)


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in a fixed order whatever the input order: the report must be deterministic."""
    if frame.empty:
        return frame.reset_index(drop=True)
    keys = [c for c in (*GROUP, "design", "policy", "component", "pair_id") if c in frame]
    rank: dict[str, Callable[[pd.Series], pd.Series]] = {
        "design": lambda s: s.map({d: i for i, d in enumerate(DESIGNS)}).fillna(99),
        "policy": lambda s: s.map({p: i for i, p in enumerate(POLICIES)}).fillna(99),
    }
    sort_frame = pd.DataFrame(
        {k: rank[k](frame[k]) if k in rank else _natural_rank(frame[k]) for k in keys}
    )
    order = sort_frame.sort_values(keys, kind="mergesort").index
    return frame.loc[order].reset_index(drop=True)


def present(frame: pd.DataFrame, col: str, vocab: Sequence[str]) -> list[str]:
    seen = set(frame[col].astype(str)) if not frame.empty else set()
    return [v for v in vocab if v in seen] + sorted(seen - set(vocab))


def legend(items: Sequence[tuple[str, str]], *, hollow: Sequence[str] = ()) -> str:
    spans = "".join(
        f'<span class="key"><i style="{"border-color" if n in hollow else "background"}:'
        f'{color}" class="{"hollow" if n in hollow else ""}"></i>{esc(n)}</span>'
        for n, color in items
    )
    return f'<div class="legend">{spans}</div>'


def section(sid: str, title: str, lead: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2><p class="lead">{lead}</p>{body}</section>'


def empty(what: str) -> str:
    return f'<p class="empty">No {esc(what)} in this run.</p>'


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
