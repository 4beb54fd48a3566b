"""Two-order dispositions of (pair, seed) and the disclosure counts per (judge, config, dataset).

Both are vectorised: outcome codes become small integers, a 6x6 lookup table gives the
disposition of every (AB outcome, BA outcome) pair at once, and counts are group sums.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from schemas import DisclosureRow, DispositionRow, conform
from schemas.vocabulary import DISPOSITIONS, FAILURE_RANK, OUTCOMES
from tasks.errors import IntegrityError

GROUP = ["judge", "config", "dataset"]
CELL = [*GROUP, "pair_id", "seed"]

_CODE = {o: i for i, o in enumerate(OUTCOMES)}
_DISPOSITION_INDEX = {d: i for i, d in enumerate(DISPOSITIONS)}


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


def _codes(values: pd.Series, *, where: str) -> np.ndarray:
    """Outcome strings to integer codes; an unknown code is an integrity error."""
    codes = values.map(_CODE)
    bad = codes.isna()
    if bad.any():
        raise IntegrityError(f"{where}: unknown outcome codes {sorted(set(values[bad]))[:5]}")
    return codes.to_numpy(dtype=np.int64)


def compute_dispositions(outcomes: pd.DataFrame) -> pd.DataFrame:
    """One DispositionRow per (judge, config, dataset, pair, seed) judged in both orders.

    `outcomes` needs the replay-input columns (OutcomeRow's first eight). A cell planned
    in one order only gets no disposition; a cell with two rows for one order is refused.
    """
    cols = [*CELL, "order", "outcome", "key"]
    df = outcomes[cols]
    dup = df.duplicated([*CELL, "order"], keep=False)
    if dup.any():
        first = df[dup].iloc[0]
        raise IntegrityError(
            f"outcomes: {int(dup.sum())} rows repeat a (judge, config, dataset, pair, seed, "
            f"order); first: judge {first.judge!r}, config {first.config!r}, pair "
            f"{first.pair_id!r}, seed {first.seed}, order {first.order}"
        )
    ab = df[df["order"] == "AB"].drop(columns="order")
    ba = df[df["order"] == "BA"].drop(columns=["order", "key"])
    cells = ab.merge(ba, on=CELL, how="inner", suffixes=("_ab", "_ba"), validate="one_to_one")
    codes_ab = _codes(cells["outcome_ab"], where="outcomes (AB)")
    codes_ba = _codes(cells["outcome_ba"], where="outcomes (BA)")
    names = np.asarray(DISPOSITIONS, dtype=object)
    disposition = names[_TABLE[codes_ab, codes_ba]]
    key = cells["key"].astype(object).where(cells["key"].notna(), None).reset_index(drop=True)
    stable_identity = pd.Series(disposition).map({"stable_A": "A", "stable_B": "B"})
    keyed = (stable_identity.notna() & key.notna()).to_numpy()
    correct = pd.Series(pd.NA, index=key.index, dtype="boolean")
    correct[keyed] = (stable_identity[keyed] == key[keyed]).to_numpy()
    result = pd.DataFrame(
        {
            **{c: cells[c].to_numpy() for c in CELL},
            "outcome_ab": cells["outcome_ab"].to_numpy(),
            "outcome_ba": cells["outcome_ba"].to_numpy(),
            "disposition": disposition,
            "key": key.to_numpy(),
            "correct": correct.to_numpy(),
        }
    )
    return result.sort_values(CELL, kind="stable").reset_index(drop=True)


def compute_disclosure(outcomes: pd.DataFrame, dispositions: pd.DataFrame) -> pd.DataFrame:
    """One DisclosureRow per (judge, config, dataset): slot counts and disposition counts.

    Slot counts come from every planned slot, so nothing leaves a denominator; consistency
    (stable among decided cells) and accuracy (of stable cells with a key) stay apart.
    """
    slots = outcomes[GROUP].copy()
    for name, codes in {
        "planned": OUTCOMES,
        "valid": ("A", "B", "T"),
        "missing": ("M",),
        "invalid": ("I",),
        "abstained": ("X",),
        "tied": ("T",),
    }.items():
        slots[name] = outcomes["outcome"].isin(codes).to_numpy(dtype=np.int64)
    slot_counts = slots.groupby(GROUP, sort=True).sum()

    d = dispositions
    cells = d[GROUP].copy()
    disp = d["disposition"]
    is_stable = disp.isin(["stable_A", "stable_B"])
    correct = d["correct"].astype("boolean")
    for name, mask in {
        "conflicting": disp == "order_conflict",
        "mixed": disp == "mixed",
        "stable": is_stable,
        "stable_tie": disp == "stable_tie",
        "incomplete": disp.str.startswith("incomplete_"),
        "stable_correct": is_stable & correct.fillna(False),
        "stable_wrong": is_stable & (~correct).fillna(False),
    }.items():
        cells[name] = np.asarray(mask, dtype=np.int64)
    cell_counts = cells.groupby(GROUP, sort=True).sum()

    table = slot_counts.join(cell_counts, how="left").fillna(0).astype(np.int64)
    decided = table["stable"] + table["conflicting"] + table["mixed"]
    keyed = table["stable_correct"] + table["stable_wrong"]
    table["consistency"] = (table["stable"] / decided.where(decided > 0)).astype(object)
    table["accuracy_of_stable"] = (table["stable_correct"] / keyed.where(keyed > 0)).astype(object)
    for col in ("consistency", "accuracy_of_stable"):
        table[col] = table[col].where(pd.notna(table[col]), None)
    return table.reset_index()


def dispositions_table(dispositions: pd.DataFrame) -> pa.Table:
    """The DispositionRow Arrow table of `compute_dispositions`' frame."""
    return conform(
        pa.Table.from_pandas(dispositions, preserve_index=False),
        DispositionRow,
        where="dispositions",
    )


def disclosure_table(disclosure: pd.DataFrame) -> pa.Table:
    """The DisclosureRow Arrow table of `compute_disclosure`' frame."""
    return conform(
        pa.Table.from_pandas(disclosure, preserve_index=False), DisclosureRow, where="disclosure"
    )
