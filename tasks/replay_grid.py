"""Replay input: checks that every pair holds exactly its full 2K grid, and encodes it as codes.

The input is long (one row per cached call outcome, SPEC section 6). K is the number of
distinct seeds of each (judge, config, dataset) group. Everything is done with Arrow hash
encodings and NumPy scatters, so a million pairs take seconds; errors name the group, the
pair and what is missing, duplicated or malformed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.outcomes import REPLAY_INPUT_COLUMNS
from tasks.errors import InputError
from tasks.replay_policies import CLASS_A, CLASS_B, CLASS_OTHER, CLASS_T, MAX_K

OUTCOME_CLASS = {
    "A": CLASS_A,
    "B": CLASS_B,
    "T": CLASS_T,
    "X": CLASS_OTHER,
    "I": CLASS_OTHER,
    "M": CLASS_OTHER,
}
ORDER_INDEX = {"AB": 0, "BA": 1}
KEY_CODE = {"A": 0, "B": 1}
_KEY_NULL = 2
_SHOWN = 5  # offending pairs listed in one error


@dataclass(frozen=True)
class ReplayGrid:
    """The validated input: one row per pair, pairs numbered by first appearance."""

    groups: list[tuple[str, str, str]]
    """(judge, config, dataset) of each group."""
    group_k: np.ndarray
    """K of each group."""
    pair_group: np.ndarray
    """Group index of each pair."""
    pair_ids: pa.Array
    """pair_id of each pair."""
    key_b: np.ndarray
    """True where the pair's key is `B` (key `A` and no key both score by the A-score)."""
    classes: np.ndarray
    """Shape (pairs, Kmax, 2), int8 outcome classes; slot [s, 0] is seed s in order AB.
    Entries past a pair's own K are -1."""

    @property
    def pair_k(self) -> np.ndarray:
        return self.group_k[self.pair_group]


def _indices(array: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Hash-encode a column: (int64 index per row, -1 for null; distinct values in order of
    first appearance)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    encoded = pc.dictionary_encode(array)
    codes = encoded.indices.fill_null(-1).to_numpy().astype(np.int64, copy=False)
    return codes, encoded.dictionary


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """Row of each code's first appearance (codes are numbered by first appearance)."""
    running = np.maximum.accumulate(codes)
    return np.flatnonzero(np.diff(running, prepend=-1) > 0)


class _Namer:
    """Names a row's group and pair in error messages."""

    def __init__(self, table: pa.Table, where: str):
        self.table = table
        self.where = where

    def pair(self, row: int) -> str:
        r = self.table.slice(row, 1).to_pylist()[0]
        return (
            f"judge={r['judge']!r} config={r['config']!r} dataset={r['dataset']!r} "
            f"pair {r['pair_id']!r}"
        )

    def fail(self, problem: str, row: int | None = None) -> InputError:
        return InputError(problem, file=self.where, row=None if row is None else row + 1)


def _coded(
    column: pa.ChunkedArray, mapping: dict[str, int], name: str, namer: _Namer, *, null: int = -1
) -> np.ndarray:
    """Map a small-vocabulary string column to codes; a foreign value names its first row."""
    codes, dictionary = _indices(column)
    values = dictionary.to_pylist()
    lookup = np.empty(len(values) + 1, dtype=np.int64)
    for i, value in enumerate(values):
        if value not in mapping:
            row = int(np.flatnonzero(codes == i)[0])
            allowed = "|".join(mapping)
            raise namer.fail(
                f"{namer.pair(row)}: {name} {value!r} is not one of {allowed}", row=row
            )
        lookup[i] = mapping[value]
    lookup[-1] = null  # code -1 marks a null
    return lookup[codes]


def select_input(table: pa.Table, where: str) -> pa.Table:
    """The replay input columns of `table` (an OutcomeRow table has them as a prefix)."""
    missing = [c for c in REPLAY_INPUT_COLUMNS if c not in table.column_names]
    if missing:
        raise InputError(f"not a replay input: missing columns {missing}", file=where)
    table = table.select(list(REPLAY_INPUT_COLUMNS))
    for name in REPLAY_INPUT_COLUMNS:
        if name == "key":
            continue
        nulls = table[name].null_count
        if nulls:
            row = int(np.flatnonzero(table[name].is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(f"column {name!r} is null ({nulls} rows)", file=where, row=row + 1)
    try:
        seed_type = pa.int64()
        casts = {n: pa.string() for n in REPLAY_INPUT_COLUMNS if n != "seed"}
        return pa.table(
            {n: table[n].cast(seed_type if n == "seed" else casts[n]) for n in REPLAY_INPUT_COLUMNS}
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InputError(f"replay input columns have the wrong types: {exc}", file=where) from exc


def _group_k(
    group: np.ndarray, seed: np.ndarray, names: list[tuple[str, str, str]], namer: _Namer
) -> np.ndarray:
    """K per group (its number of distinct seeds), checked: even, at most MAX_K, seeds 0..K-1."""
    bad = np.flatnonzero((seed < 0) | (seed >= 2 * MAX_K))
    if bad.size:
        row = int(bad[0])
        raise namer.fail(f"{namer.pair(row)}: seed {int(seed[row])} is out of range", row=row)
    n_groups = len(names)
    width = 2 * MAX_K
    present = np.bincount(group * width + seed, minlength=n_groups * width) > 0
    present = present.reshape(n_groups, width)
    k = present.sum(axis=1)
    for g in range(n_groups):
        judge, config, dataset = names[g]
        label = f"judge={judge!r} config={config!r} dataset={dataset!r}"
        seeds = np.flatnonzero(present[g])
        if k[g] % 2 or k[g] > MAX_K:
            raise namer.fail(
                f"{label}: K = {k[g]} distinct seeds {seeds.tolist()}; replay needs an even K "
                f"between 2 and {MAX_K}"
            )
        if seeds[-1] != k[g] - 1:
            raise namer.fail(
                f"{label}: seeds {seeds.tolist()} are not 0..{k[g] - 1} "
                f"(K = {k[g]} is the number of distinct seeds)"
            )
    return k


def build_grid(table: pa.Table, *, where: str = "replay input") -> ReplayGrid:
    """Validate a replay input table and encode it; raise InputError naming offending pairs."""
    table = select_input(table, where)
    namer = _Namer(table, where)
    if table.num_rows == 0:
        raise namer.fail("no rows to replay")

    judge, judges = _indices(table["judge"])
    config, configs = _indices(table["config"])
    dataset, datasets = _indices(table["dataset"])
    n_c, n_d = len(configs), len(datasets)
    group, _ = _indices(pa.array((judge * n_c + config) * n_d + dataset))
    group_rows = _first_rows(group)
    names = [
        (
            str(judges[int(judge[r])].as_py()),
            str(configs[int(config[r])].as_py()),
            str(datasets[int(dataset[r])].as_py()),
        )
        for r in group_rows.tolist()
    ]
    pid, pid_values = _indices(table["pair_id"])
    pair, _ = _indices(pa.array(group * len(pid_values) + pid))
    first_row = _first_rows(pair)
    n_pairs = len(first_row)

    seed = table["seed"].to_numpy().astype(np.int64, copy=False)
    order = _coded(table["order"], ORDER_INDEX, "order", namer)
    outcome = _coded(table["outcome"], OUTCOME_CLASS, "outcome", namer)
    key = _coded(table["key"], KEY_CODE, "key", namer, null=_KEY_NULL)

    group_k = _group_k(group, seed, names, namer)
    pair_group = group[first_row]
    pair_k = group_k[pair_group]
    k_max = int(group_k.max())
    width = 2 * k_max

    slot = seed * 2 + order
    counts = np.bincount(pair * width + slot, minlength=n_pairs * width).reshape(n_pairs, width)
    expected = (np.arange(width)[None, :] < 2 * pair_k[:, None]).astype(np.int64)
    wrong = np.flatnonzero((counts != expected).any(axis=1))
    if wrong.size:
        lines = []
        for p in wrong[:_SHOWN]:
            problems = []
            for s in np.flatnonzero(counts[p] != expected[p]):
                cell = f"seed {s // 2} order {('AB', 'BA')[s % 2]}"
                if counts[p, s] == 0:
                    problems.append(f"missing {cell}")
                else:
                    problems.append(f"duplicate {cell} ({counts[p, s]} rows)")
            lines.append(
                f"{namer.pair(int(first_row[p]))} (K = {pair_k[p]}): {', '.join(problems)}"
            )
        more = f" and {wrong.size - _SHOWN} more pairs" if wrong.size > _SHOWN else ""
        raise namer.fail(
            f"{wrong.size} pairs do not hold exactly the 2K rows of the full grid: "
            + "; ".join(lines)
            + more
        )

    pair_key = np.empty(n_pairs, dtype=np.int64)
    pair_key[pair] = key
    clash = np.flatnonzero(pair_key[pair] != key)
    if clash.size:
        row = int(clash[0])
        raise namer.fail(f"{namer.pair(row)}: rows of the pair disagree on the key", row=row)

    classes = np.full((n_pairs, width), -1, dtype=np.int8)
    classes[pair, slot] = outcome
    return ReplayGrid(
        groups=names,
        group_k=group_k,
        pair_group=pair_group,
        pair_ids=table["pair_id"].combine_chunks().take(pa.array(first_row)),
        key_b=pair_key == KEY_CODE["B"],
        classes=classes.reshape(n_pairs, k_max, 2),
    )
