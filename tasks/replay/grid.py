"""Replay input: checks that every pair holds exactly its full 2K grid, and encodes it as classes.

The input is long (one row per cached call outcome, docs/design.md#replay-input). K is the number of
distinct seeds of each (judge, config, dataset) group. The input is read once and reduced to
codes (`tasks.replay.coded`); each group's grid is then checked and built from its codes alone,
one group at a time. Input already in grid order (each pair's rows together, by seed then
order) is checked and laid out without a scatter. Errors name the group, the pair and what is
missing, duplicated or malformed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from schemas.outcomes import REPLAY_INPUT_COLUMNS
from schemas.vocabulary import MAX_K
from tasks.errors import InputError
from tasks.replay.coded import KEY_B, GroupRows, encode, require_columns

_SHOWN = 5  # offending pairs listed in one error
_DICTIONARY = ["judge", "config", "dataset", "pair_id", "order", "outcome", "key"]
"""Text columns read dictionary-encoded, as parquet stores them: their rows compare as integers."""
_BATCH_ROWS = 1 << 21


@dataclass(frozen=True)
class ReplayGrid:
    """The validated input of one (judge, config, dataset) group: one row per pair, pairs in
    order of first appearance."""

    name: tuple[str, str, str]
    """(judge, config, dataset) of the group."""
    k: int
    """K of the group."""
    pair_ids: pa.Array
    """pair_id of each pair."""
    key_b: np.ndarray
    """True where the pair's key is `B` (key `A` and no key both score by the A-score)."""
    classes: np.ndarray
    """Shape (pairs, K, 2), int8 outcome classes; slot [s, 0] is seed s in order AB."""


def _allocate_from_jemalloc() -> None:
    """Make jemalloc Arrow's memory pool, unless ARROW_DEFAULT_MEMORY_POOL chose one.

    Arrow's default mimalloc pool reserves a 1 GiB arena marked for transparent huge pages:
    a process's first read of a large input then stalls on the kernel zeroing and compacting
    huge pages (about 1 s of system time at 1M pairs on a loaded machine, a third of the
    replay). jemalloc takes ordinary pages. Buffers keep the pool that allocated them, so
    switching is safe at any time; a pyarrow built without jemalloc keeps its default."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return
    with contextlib.suppress(NotImplementedError):
        pa.set_memory_pool(pa.jemalloc_memory_pool())


def _source(path: str | Path) -> pq.ParquetFile:
    """The parquet file, checked to hold the replay input columns; text columns are read
    dictionary-encoded (into jemalloc's pool, `_allocate_from_jemalloc`)."""
    _allocate_from_jemalloc()
    try:
        require_columns(pq.read_schema(path).names, str(path))
        return pq.ParquetFile(path, read_dictionary=_DICTIONARY)
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"cannot read parquet: {exc}", file=str(path)) from exc


def _row_groups(source: pq.ParquetFile) -> Iterator[pa.Table | pa.RecordBatch]:
    """The replay input columns, one row group at a time (its columns read in parallel), or
    batch by batch for a row group too large to hold at once."""
    columns = list(REPLAY_INPUT_COLUMNS)
    for i in range(source.num_row_groups):
        if source.metadata.row_group(i).num_rows <= _BATCH_ROWS:
            yield source.read_row_group(i, columns=columns)
        else:
            yield from source.iter_batches(_BATCH_ROWS, row_groups=[i], columns=columns)


def _ahead(parts: Iterator[pa.Table | pa.RecordBatch]) -> Iterator[pa.Table | pa.RecordBatch]:
    """The same parts, the next one read on another thread while the caller uses this one."""
    with ThreadPoolExecutor(1) as pool:
        coming = pool.submit(next, parts, None)
        while (part := coming.result()) is not None:
            coming = pool.submit(next, parts, None)
            yield part


def input_batches(path: str | Path) -> Iterator[pa.RecordBatch]:
    """The replay input columns of a parquet file (a run's outcomes.parquet works too), batch
    by batch, reading ahead of the caller."""
    source = _source(path)
    try:
        for part in _ahead(_row_groups(source)):
            yield from (part.to_batches() if isinstance(part, pa.Table) else [part])
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"cannot read parquet: {exc}", file=str(path)) from exc


def read_replay_input(path: str | Path) -> pa.Table:
    """The replay input columns of a parquet file, as one table (row groups read in parallel)."""
    _source(path)
    try:
        return pq.read_table(path, columns=list(REPLAY_INPUT_COLUMNS), read_dictionary=_DICTIONARY)
    except (OSError, pa.ArrowInvalid) as exc:
        raise InputError(f"cannot read parquet: {exc}", file=str(path)) from exc


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


def _group_k(rows: GroupRows, where: str) -> int:
    """K of the group (its number of distinct seeds), checked: even, at most MAX_K, seeds 0..K-1."""
    cells = pc.unique(pa.array(rows.cell)).to_numpy()
    seeds = np.unique(cells // 2)
    k = len(seeds)
    judge, config, dataset = rows.name
    label = f"judge={judge!r} config={config!r} dataset={dataset!r}"
    if k % 2 or k > MAX_K:
        raise InputError(
            f"{label}: K = {k} distinct seeds {seeds.tolist()}; replay needs an even K "
            f"between 2 and {MAX_K}",
            file=where,
        )
    if seeds[-1] != k - 1:
        raise InputError(
            f"{label}: seeds {seeds.tolist()} are not 0..{k - 1} "
            f"(K = {k} is the number of distinct seeds)",
            file=where,
        )
    return k


def _grid_errors(
    counts: np.ndarray,
    width: int,
    wrong: np.ndarray,
    run_pair: np.ndarray,
    rows: GroupRows,
    where: str,
) -> InputError:
    """One error listing the first offending pairs and their missing or duplicated cells."""
    lines = []
    for p in wrong[:_SHOWN]:
        problems = []
        for s in np.flatnonzero(counts[p] != 1):
            cell = f"seed {s // 2} order {('AB', 'BA')[s % 2]}"
            if counts[p, s] == 0:
                problems.append(f"missing {cell}")
            else:
                problems.append(f"duplicate {cell} ({counts[p, s]} rows)")
        run = int(np.flatnonzero(run_pair == p)[0])
        lines.append(f"{rows.pair(run)} (K = {width // 2}): {', '.join(problems)}")
    more = f"; and {wrong.size - _SHOWN} more pairs" if wrong.size > _SHOWN else ""
    first = int(rows.first_row[int(np.flatnonzero(run_pair == wrong[0])[0])])
    return InputError(
        f"{wrong.size} pairs do not hold exactly the 2K rows of the full grid: "
        + "; ".join(lines)
        + more,
        file=where,
        row=first + 1,
    )


def _in_grid_order(rows: GroupRows, n_runs: int, width: int) -> bool:
    """True if each run holds exactly the pair's 2K cells, in order (seed, then order)."""
    if len(rows.cell) != n_runs * width:
        return False
    runs = rows.run.reshape(n_runs, width)
    every = np.arange(n_runs, dtype=runs.dtype)
    if not (np.array_equal(runs[:, 0], every) and np.array_equal(runs[:, -1], every)):
        return False
    return bool((rows.cell.reshape(n_runs, width) == np.arange(width, dtype=np.int8)).all())


def _pairs(run_ids: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(distinct pair ids by first appearance, pair of each run); pair ids in increasing
    order are distinct as they stand, without hashing them."""
    n = len(run_ids)
    if n < 2 or pc.all(pc.less(run_ids.slice(0, n - 1), run_ids.slice(1))).as_py():
        return run_ids, np.arange(n)
    encoded = pc.dictionary_encode(run_ids)
    return encoded.dictionary, encoded.indices.to_numpy()


def build_grid(rows: GroupRows, where: str) -> ReplayGrid:
    """Check one group's codes and lay out its grid; raise InputError naming offending pairs."""
    k = _group_k(rows, where)
    width = 2 * k
    pair_ids, run_pair = _pairs(rows.pair_ids)
    n_runs, n_pairs = len(run_pair), len(pair_ids)
    if n_pairs == n_runs and _in_grid_order(rows, n_runs, width):
        classes = rows.outcome.reshape(n_pairs, k, 2)
    else:
        pair = run_pair[rows.run]
        cell = pair.astype(np.int64) * width + rows.cell
        counts = np.bincount(cell, minlength=n_pairs * width).reshape(n_pairs, width)
        wrong = np.flatnonzero((counts != 1).any(axis=1))
        if wrong.size:
            raise _grid_errors(counts, width, wrong, run_pair, rows, where)
        flat = np.empty(n_pairs * width, dtype=np.int8)
        flat[cell] = rows.outcome
        classes = flat.reshape(n_pairs, k, 2)
    pair_key = np.empty(n_pairs, dtype=np.int8)
    pair_key[run_pair] = rows.key
    clash = np.flatnonzero(pair_key[run_pair] != rows.key)
    if clash.size:
        run = int(clash[0])
        raise InputError(
            f"{rows.pair(run)}: rows of the pair disagree on the key",
            file=where,
            row=int(rows.first_row[run]) + 1,
        )
    return ReplayGrid(
        name=rows.name,
        k=k,
        pair_ids=pair_ids,
        key_b=pair_key == KEY_B,
        classes=classes,
    )


def replay_grids(batches: Iterable[pa.RecordBatch], where: str) -> Iterator[ReplayGrid]:
    """The grid of each group of the replay input, one at a time, reading the input once.

    Only the input's codes are held, and each group's grid only while it is in use."""
    groups = encode(batches, where)
    while groups:
        name, parts = groups.pop(0)
        rows = parts.rows(name)
        del parts
        grid = build_grid(rows, where)
        del rows  # the group's run and cell codes: the grid keeps what it needs
        yield grid
