"""Replay input: checks that every pair holds exactly its full 2K grid, and encodes it as codes.

The input is long (one row per cached call outcome, docs/design.md#replay-input). K is the number of
distinct seeds of each (judge, config, dataset) group. Everything is done with Arrow hash
encodings and NumPy scatters, so a million pairs take seconds; errors name the group, the
pair and what is missing, duplicated or malformed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas.outcomes import REPLAY_INPUT_COLUMNS
from schemas.vocabulary import MAX_K
from tasks.errors import InputError
from tasks.replay.policies import CLASS_A, CLASS_B, CLASS_OTHER, CLASS_T

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
_SMALL_TEXT = ["judge", "config", "dataset", "order", "outcome", "key"]


@dataclass(frozen=True)
class ReplayGrid:
    """The validated input: one row per pair, pairs ordered by group (groups in order of
    their judge, config and dataset first appearing), then by first appearance."""

    groups: list[tuple[str, str, str]]
    """(judge, config, dataset) of each group."""
    group_k: np.ndarray
    """K of each group."""
    pair_group: np.ndarray
    """Group index of each pair (non-decreasing)."""
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

    @property
    def group_starts(self) -> np.ndarray:
        """Index of each group's first pair (pairs are contiguous per group)."""
        return np.searchsorted(self.pair_group, np.arange(len(self.groups)))


def read_replay_input(path: str | Path, group: tuple[str, str, str] | None = None) -> pa.Table:
    """Read the replay input columns of a parquet file (a run's outcomes.parquet works too),
    or only the rows of one (judge, config, dataset) `group`.

    Small-vocabulary text columns are read dictionary-encoded, as parquet stores them.
    """
    try:
        names = pq.read_schema(path).names
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"cannot read parquet: {exc}", file=str(path)) from exc
    missing = [c for c in REPLAY_INPUT_COLUMNS if c not in names]
    if missing:
        raise InputError(f"not a replay input: missing columns {missing}", file=str(path))
    try:
        return pq.read_table(
            path,
            columns=list(REPLAY_INPUT_COLUMNS),
            read_dictionary=_SMALL_TEXT,
            filters=None
            if group is None
            else [(name, "=", value) for name, value in zip(_SMALL_TEXT, group, strict=False)],
        )
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"cannot read parquet: {exc}", file=str(path)) from exc


def input_groups(path: str | Path) -> list[tuple[str, str, str]]:
    """The (judge, config, dataset) groups of a replay input file, in the order `build_grid`
    gives them (by each value's first appearance), read batch by batch."""
    seen: dict[str, dict[str, None]] = {name: {} for name in _SMALL_TEXT[:3]}
    groups: dict[tuple[str, str, str], None] = {}
    try:
        batches = pq.ParquetFile(path).iter_batches(columns=_SMALL_TEXT[:3])
        for batch in batches:
            table = pa.Table.from_batches([batch])
            for name in seen:
                seen[name].update(dict.fromkeys(table[name].unique().to_pylist()))
            distinct = table.group_by(_SMALL_TEXT[:3], use_threads=False).aggregate([])
            groups.update(dict.fromkeys(zip(*(distinct[n].to_pylist() for n in seen), strict=True)))
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"cannot read parquet: {exc}", file=str(path)) from exc
    rank = {name: {value: i for i, value in enumerate(values)} for name, values in seen.items()}
    return sorted(groups, key=lambda g: tuple(rank[n][v] for n, v in zip(rank, g, strict=True)))


def _runs(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(run of each row, True on each run's first row): a run is a stretch of consecutive rows with
    the same judge, config, dataset and pair_id. Rows of a pair usually sit together, so
    the text is hashed once per run rather than once per row."""
    n = table.num_rows
    head = np.zeros(n, dtype=bool)
    head[0] = True
    for name in ("judge", "config", "dataset", "pair_id"):
        column = table[name]
        if pa.types.is_dictionary(column.type):
            codes = column.combine_chunks().indices.to_numpy()
            head[1:] |= codes[1:] != codes[:-1]
        else:
            changed = pc.not_equal(column.slice(1), column.slice(0, n - 1))
            head[1:] |= changed.to_numpy()
    run = np.cumsum(head, dtype=np.int32 if n < 2**31 else np.int64) - 1
    return run, head


def _kept(column: pa.ChunkedArray, mask: np.ndarray) -> pa.ChunkedArray:
    """The rows of `column` where `mask` is True, chunk by chunk (never concatenating it)."""
    kept, start = [], 0
    for chunk in column.chunks:
        kept.append(chunk.filter(pa.array(mask[start : start + len(chunk)])))
        start += len(chunk)
    return pa.chunked_array(kept, column.type)


def _indices(column: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Hash-encode a column: (int64 index per row, -1 for null; distinct values).

    Rows of one pair usually sit together, so only the first row of each run of equal
    values is hashed; the run's other rows copy its code.
    """
    array = column.combine_chunks()
    if pa.types.is_dictionary(array.type):
        indices = array.indices.fill_null(-1) if array.null_count else array.indices
        return indices.to_numpy(), array.dictionary
    n = len(array)
    changed = pc.not_equal(array.slice(1), array.slice(0, max(n - 1, 0)))
    head = np.ones(n, dtype=bool)
    head[1:] = changed.fill_null(True).to_numpy(zero_copy_only=False)
    heads = np.flatnonzero(head)
    encoded = pc.dictionary_encode(array.take(pa.array(heads)) if len(heads) < n else array)
    codes = encoded.indices.fill_null(-1).to_numpy()
    if len(heads) < n:
        codes = codes[np.cumsum(head) - 1]
    return codes, encoded.dictionary


def dense_codes(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Renumber codes 0..size-1 to 0..n-1 keeping their order: (new code per row, old code
    of each new one)."""
    if size <= max(4 * len(codes), 1 << 16):
        codes = codes.astype(np.int64, copy=False)
        present = np.flatnonzero(np.bincount(codes, minlength=size))
        rank = np.zeros(size, dtype=np.int64)
        rank[present] = np.arange(len(present))
        return rank[codes], present
    present, inverse = np.unique(codes, return_inverse=True)
    return inverse.astype(np.int64, copy=False), present


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
    """Map a small-vocabulary text column to int8 codes; a foreign value names its first row."""
    codes, dictionary = _indices(column)
    values = dictionary.to_pylist()
    lookup = np.full(len(values) + 1, -1, dtype=np.int8)
    foreign = [i for i, value in enumerate(values) if value not in mapping]
    for i, value in enumerate(values):
        if value in mapping:
            lookup[i] = mapping[value]
    if foreign:  # a dictionary may hold values no row uses: only a used one is an error
        rows = np.flatnonzero(np.isin(codes, foreign))
        if rows.size:
            row = int(rows[0])
            value = values[int(codes[row])]
            allowed = "|".join(mapping)
            raise namer.fail(
                f"{namer.pair(row)}: {name} {value!r} is not one of {allowed}", row=row
            )
    lookup[-1] = null  # code -1 marks a null
    return lookup[codes]


def select_input(table: pa.Table, where: str) -> pa.Table:
    """The replay input columns of `table` (an OutcomeRow table has them as a prefix)."""
    missing = [c for c in REPLAY_INPUT_COLUMNS if c not in table.column_names]
    if missing:
        raise InputError(f"not a replay input: missing columns {missing}", file=where)
    table = table.select(list(REPLAY_INPUT_COLUMNS))
    for name in REPLAY_INPUT_COLUMNS:
        nulls = table[name].null_count
        if nulls and name != "key":
            row = int(np.flatnonzero(table[name].is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(f"column {name!r} is null ({nulls} rows)", file=where, row=row + 1)
    columns = {}
    try:
        for name in REPLAY_INPUT_COLUMNS:
            column = table[name]
            if name == "seed":
                column = column.cast(pa.int64())
            elif name == "pair_id" or not pa.types.is_dictionary(column.type):
                # Many distinct pair ids: unifying per-chunk dictionaries costs more than
                # hashing the decoded text once.
                column = column.cast(pa.string())
            columns[name] = column
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InputError(f"replay input columns have the wrong types: {exc}", file=where) from exc
    return pa.table(columns).unify_dictionaries()


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


def _grid_errors(
    counts: np.ndarray, expected: np.ndarray, wrong: np.ndarray, pair: np.ndarray, namer: _Namer
) -> InputError:
    """One error listing the first offending pairs and their missing or duplicated cells."""
    lines = []
    for p in wrong[:_SHOWN]:
        problems = []
        for s in np.flatnonzero(counts[p] != expected[p]):
            cell = f"seed {s // 2} order {('AB', 'BA')[s % 2]}"
            if counts[p, s] == 0:
                problems.append(f"missing {cell}")
            else:
                problems.append(f"duplicate {cell} ({counts[p, s]} rows)")
        row = int(np.flatnonzero(pair == p)[0])
        k = int(expected[p].sum()) // 2
        lines.append(f"{namer.pair(row)} (K = {k}): {', '.join(problems)}")
    more = f"; and {wrong.size - _SHOWN} more pairs" if wrong.size > _SHOWN else ""
    return namer.fail(
        f"{wrong.size} pairs do not hold exactly the 2K rows of the full grid: "
        + "; ".join(lines)
        + more
    )


def build_grid(table: pa.Table, *, where: str = "replay input") -> ReplayGrid:
    """Validate a replay input table and encode it; raise InputError naming offending pairs."""
    table = select_input(table, where)
    namer = _Namer(table, where)
    if table.num_rows == 0:
        raise namer.fail("no rows to replay")

    run, head = _runs(table)
    firsts = {name: _kept(table[name], head) for name in ("judge", "config", "dataset", "pair_id")}
    # Run-level codes in int64, so products of code ranges never overflow.
    judge, judges = _indices(firsts["judge"])
    config, configs = _indices(firsts["config"])
    dataset, datasets = _indices(firsts["dataset"])
    judge, config, dataset = (c.astype(np.int64) for c in (judge, config, dataset))
    n_c, n_d = len(configs), len(datasets)
    run_group, group_codes = dense_codes(
        (judge * n_c + config) * n_d + dataset, len(judges) * n_c * n_d
    )
    names = [
        (
            str(judges[int(c) // (n_c * n_d)].as_py()),
            str(configs[(int(c) // n_d) % n_c].as_py()),
            str(datasets[int(c) % n_d].as_py()),
        )
        for c in group_codes
    ]
    pid, pid_values = _indices(firsts["pair_id"])
    n_pid = len(pid_values)
    # Codes group-major, so each group's pairs are contiguous.
    run_pair, pair_codes = dense_codes(run_group * n_pid + pid, len(names) * n_pid)
    n_pairs = len(pair_codes)
    pair_group = pair_codes // n_pid
    # Row-level arrays in the smallest type that holds them: rows are the bulk of memory.
    small = np.int32 if n_pairs * 2 * MAX_K < 2**31 else np.int64
    pair, group = run_pair.astype(small)[run], run_group.astype(small)[run]
    del run

    seed = table["seed"].to_numpy().astype(np.int64, copy=False)
    order = _coded(table["order"], ORDER_INDEX, "order", namer)
    outcome = _coded(table["outcome"], OUTCOME_CLASS, "outcome", namer)
    key = _coded(table["key"], KEY_CODE, "key", namer, null=_KEY_NULL)

    group_k = _group_k(group, seed, names, namer)
    del group
    pair_k = group_k[pair_group]
    width = 2 * int(group_k.max())

    cell = pair * width + (seed.astype(np.int8) * 2 + order)
    counts = np.bincount(cell, minlength=n_pairs * width).reshape(n_pairs, width)
    expected = np.arange(width)[None, :] < 2 * pair_k[:, None]
    wrong = np.flatnonzero((counts != expected).any(axis=1))
    if wrong.size:
        raise _grid_errors(counts, expected, wrong, pair, namer)

    pair_key = np.empty(n_pairs, dtype=np.int8)
    pair_key[pair] = key
    clash = np.flatnonzero(pair_key[pair] != key)
    if clash.size:
        row = int(clash[0])
        raise namer.fail(f"{namer.pair(row)}: rows of the pair disagree on the key", row=row)

    classes = np.full(n_pairs * width, -1, dtype=np.int8)
    classes[cell] = outcome
    pair_ids = pid_values.take(pa.array(pair_codes % n_pid))
    return ReplayGrid(
        groups=names,
        group_k=group_k,
        pair_group=pair_group,
        pair_ids=pair_ids.cast(pa.string()),
        key_b=pair_key == KEY_CODE["B"],
        classes=classes.reshape(n_pairs, width // 2, 2),
    )
