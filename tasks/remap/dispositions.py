"""Two-order dispositions of (pair, seed) and the disclosure counts per (judge, config, dataset).

Both are vectorised over Arrow tables: outcome codes become small integers, a 6x6 lookup table
gives the disposition of every (AB outcome, BA outcome) pair at once, and counts are sums per
group code (`tasks.remap.keys`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas import DisclosureRow, DispositionRow, conform
from schemas.vocabulary import DISPOSITIONS, FAILURE_RANK, OUTCOMES
from tasks.errors import IntegrityError
from tasks.remap.keys import first_rows, row_codes, rows_in, sort_order

GROUP = ["judge", "config", "dataset"]
CELL = [*GROUP, "pair_id", "seed"]

_DISPOSITION_INDEX = {d: i for i, d in enumerate(DISPOSITIONS)}
_OUTCOME_SET = pa.array(OUTCOMES)


def two_order_disposition(ab: str, ba: str) -> str:
    """docs/design.md#dispositions for one (pair, seed): the rule the lookup table is built from."""
    decisive = {"A", "B"}
    if ab in decisive and ba in decisive:
        return f"stable_{ab}" if ab == ba else "order_conflict"
    if ab == "T" and ba == "T":
        return "stable_tie"
    if {ab, ba} <= decisive | {"T"}:
        return "mixed"
    worst = min((o for o in (ab, ba) if o in FAILURE_RANK), key=FAILURE_RANK.__getitem__)
    return f"incomplete_{worst}"


# _TABLE[code(ab), code(ba)] is the index into DISPOSITIONS.
_TABLE = np.array(
    [[_DISPOSITION_INDEX[two_order_disposition(ab, ba)] for ba in OUTCOMES] for ab in OUTCOMES],
    dtype=np.int8,
)


def _codes(values: pa.ChunkedArray, *, where: str) -> np.ndarray:
    """Outcome strings to integer codes; an unknown code is an integrity error."""
    codes = pc.index_in(values, value_set=_OUTCOME_SET)
    if codes.null_count:
        bad = pc.filter(values, pc.is_null(codes)).unique().to_pylist()
        raise IntegrityError(f"{where}: unknown outcome codes {sorted(bad, key=str)[:5]}")
    return codes.to_numpy().astype(np.int64, copy=False)


def _neighbours(table: pa.Table, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """For each row but the last, whether the next row's key (`keys`, compared in turn) is
    greater, and whether it is the same (a null key is neither)."""
    n = max(table.num_rows - 1, 0)
    greater, same = np.zeros(n, dtype=bool), np.ones(n, dtype=bool)
    for key in keys:
        this, next_ = table[key].slice(0, n), table[key].slice(1)
        greater |= same & pc.fill_null(pc.less(this, next_), False).to_numpy()
        same &= pc.fill_null(pc.equal(this, next_), False).to_numpy()
    return greater, same


def _in_order(outcomes: pa.Table) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
    """The outcomes sorted by cell and order (stably; as they are when they already are),
    the row each came from, and for each row but the last whether the next row is of the
    same cell, and of the same cell and order."""
    table = outcomes.select([*CELL, "order", "outcome", "key"])
    rows = np.arange(table.num_rows)
    later_cell, same_cell = _neighbours(table, CELL)
    later_order, same_order = _neighbours(table, ["order"])
    if not (later_cell | same_cell & (later_order | same_order)).all():
        rows = sort_order([table[c] for c in [*CELL, "order"]])
        table = table.take(pa.array(rows))
        _, same_cell = _neighbours(table, CELL)
        _, same_order = _neighbours(table, ["order"])
    return table, rows, same_cell, same_cell & same_order


def _refuse_repeats(outcomes: pa.Table, rows: np.ndarray, repeat: np.ndarray) -> None:
    """Refuse sorted outcomes in which a row has the cell and order of the next (`repeat`);
    `rows` are their rows in `outcomes`, whose first repeating row the error names."""
    if not repeat.any():
        return
    involved = np.zeros(len(rows), dtype=bool)
    involved[:-1] |= repeat
    involved[1:] |= repeat
    first = outcomes.slice(int(rows[involved].min()), 1).to_pylist()[0]
    raise IntegrityError(
        f"outcomes: {int(involved.sum())} rows repeat a (judge, config, dataset, pair, seed, "
        f"order); first: judge {first['judge']!r}, config {first['config']!r}, pair "
        f"{first['pair_id']!r}, seed {first['seed']}, order {first['order']}"
    )


def _is(column: pa.ChunkedArray, value: str) -> np.ndarray:
    return pc.fill_null(pc.equal(column, value), False).to_numpy()


def compute_dispositions(outcomes: pa.Table) -> pa.Table:
    """The DispositionRow table: one row per (judge, config, dataset, pair, seed) judged in
    both orders, sorted by those columns.

    `outcomes` needs the replay-input columns (OutcomeRow's first eight). A cell planned
    in one order only gets no disposition; a cell with two rows for one order is refused.
    Outcomes sorted by cell and order (as `remap_outcomes` makes them) are read as they
    are, others are sorted first.
    """
    table, rows, same_cell, repeat = _in_order(outcomes)
    _refuse_repeats(outcomes, rows, repeat)
    # Sorted, a cell's AB row comes right before its BA row.
    order, n = table["order"], len(same_cell)
    ab = np.flatnonzero(same_cell & _is(order.slice(0, n), "AB") & _is(order.slice(1), "BA"))
    cells = table.take(pa.array(ab))
    outcome_ba = table["outcome"].take(pa.array(ab + 1))
    codes_ab = _codes(cells["outcome"], where="outcomes (AB)")
    codes_ba = _codes(outcome_ba, where="outcomes (BA)")
    disposition = pa.array(np.asarray(DISPOSITIONS, dtype=object)[_TABLE[codes_ab, codes_ba]])
    # `correct` is known for stable_A and stable_B cells with a key only.
    stable_identity = pc.if_else(
        pc.equal(disposition, "stable_A"),
        "A",
        pc.if_else(pc.equal(disposition, "stable_B"), "B", pa.scalar(None, pa.string())),
    )
    table = pa.table(
        {
            **{c: cells[c] for c in CELL},
            "outcome_ab": cells["outcome"],
            "outcome_ba": outcome_ba,
            "disposition": disposition,
            "key": cells["key"],
            "correct": pc.equal(stable_identity, cells["key"]),
        }
    )
    return conform(table, DispositionRow, where="dispositions")


_SLOT_COUNTS = {
    "planned": OUTCOMES,
    "valid": ("A", "B", "T"),
    "missing": ("M",),
    "invalid": ("I",),
    "abstained": ("X",),
    "tied": ("T",),
}
_INCOMPLETE = tuple(d for d in DISPOSITIONS if d.startswith("incomplete_"))
_CELL_COUNTS = {
    "conflicting": ("order_conflict",),
    "mixed": ("mixed",),
    "stable": ("stable_A", "stable_B"),
    "stable_tie": ("stable_tie",),
    "incomplete": _INCOMPLETE,
}


def _per_group(group: np.ndarray, groups: int, codes: np.ndarray, size: int) -> np.ndarray:
    """Shape (groups, size): how many rows of each group hold each code (rows of group -1
    count nowhere)."""
    counted = group >= 0
    flat = group[counted] * size + codes[counted]
    return np.bincount(flat, minlength=groups * size).reshape(groups, size)


def _code_of(values: pa.ChunkedArray, vocabulary: tuple[str, ...]) -> np.ndarray:
    """Each value's index in `vocabulary`, len(vocabulary) for any other value or null."""
    codes = pc.index_in(values, value_set=pa.array(vocabulary, pa.string()))
    return pc.fill_null(codes, len(vocabulary)).to_numpy().astype(np.int64, copy=False)


def compute_disclosure(outcomes: pa.Table, dispositions: pa.Table) -> pa.Table:
    """The DisclosureRow table: per (judge, config, dataset), sorted by them, slot counts and
    disposition counts.

    Slot counts come from every planned slot, so nothing leaves a denominator; consistency
    (stable among decided cells) and accuracy (of stable cells with a key) stay apart.
    """
    slot_group = row_codes([outcomes[c] for c in GROUP])
    groups = outcomes.select(GROUP).take(pa.array(first_rows(slot_group)))
    n = groups.num_rows
    slots = _per_group(slot_group, n, _code_of(outcomes["outcome"], OUTCOMES), len(OUTCOMES) + 1)
    counts = {
        name: slots[:, [OUTCOMES.index(c) for c in codes]].sum(axis=1)
        for name, codes in _SLOT_COUNTS.items()
    }
    cell_group = rows_in([dispositions[c] for c in GROUP], [groups[c] for c in GROUP])
    # Per group, disposition and `correct` (false, true, null).
    correct = pc.fill_null(pc.cast(dispositions["correct"], pa.int64()), 2).to_numpy()
    disposition = _code_of(dispositions["disposition"], DISPOSITIONS)
    cells = _per_group(cell_group, n, disposition * 3 + correct, (len(DISPOSITIONS) + 1) * 3)
    cells = cells.reshape(n, len(DISPOSITIONS) + 1, 3)
    for name, kinds in _CELL_COUNTS.items():
        counts[name] = cells[:, [DISPOSITIONS.index(d) for d in kinds]].sum(axis=(1, 2))
    stable = cells[:, [DISPOSITIONS.index(d) for d in _CELL_COUNTS["stable"]]].sum(axis=1)
    counts["stable_correct"], counts["stable_wrong"] = stable[:, 1], stable[:, 0]
    decided = counts["stable"] + counts["conflicting"] + counts["mixed"]
    keyed = counts["stable_correct"] + counts["stable_wrong"]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = {
            "consistency": pa.array(counts["stable"] / decided, mask=decided == 0),
            "accuracy_of_stable": pa.array(counts["stable_correct"] / keyed, mask=keyed == 0),
        }
    table = pa.table({**{c: groups[c] for c in GROUP}, **counts, **ratios})
    order = sort_order([table[c] for c in GROUP])
    return conform(table.take(pa.array(order)), DisclosureRow, where="disclosure")
