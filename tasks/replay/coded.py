"""The replay input reduced to small codes, group by group, in one pass over its record batches.

Each row becomes its run (a stretch of consecutive rows of one pair), its cell
(seed x 2 + order) and its outcome class; each run keeps its first row, pair_id and key.
That is all `tasks.replay.grid` needs to check and build a group's grid, so a file is read
once and only its codes are held (a few bytes a row), never its rows. Errors found here
(nulls, foreign values, seeds out of range, a pair's rows disagreeing on the key) name the
first offending row.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from schemas.outcomes import REPLAY_INPUT_COLUMNS
from schemas.vocabulary import MAX_K
from tasks.errors import InputError
from tasks.replay.policies import CLASS_A, CLASS_B, CLASS_OTHER, CLASS_T

__all__ = ["KEY_B", "GroupParts", "GroupRows", "encode", "require_columns"]

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
KEY_B = KEY_CODE["B"]
_KEY_NULL = 2
_GROUP_TEXT = ("judge", "config", "dataset")
_BITS = 21  # bits of each of the three value indices in a row's group code
THREADS = 2
"""Threads preparing batches: the two cores."""


@dataclass
class GroupRows:
    """One (judge, config, dataset) group's rows as codes, in input order."""

    name: tuple[str, str, str]
    run: np.ndarray
    """int32 per row: its run, counted within the group (non-decreasing)."""
    cell: np.ndarray
    """int8 per row: seed x 2 + order index."""
    outcome: np.ndarray
    """int8 per row: outcome class."""
    first_row: np.ndarray
    """int64 per run: input row (from 0) of its first row."""
    pair_ids: pa.Array
    """pair_id of each run."""
    key: np.ndarray
    """int8 per run: 0 key A, 1 key B, 2 no key."""

    def pair(self, run: int) -> str:
        """The group and pair of a run, for error messages."""
        judge, config, dataset = self.name
        return (
            f"judge={judge!r} config={config!r} dataset={dataset!r} "
            f"pair {self.pair_ids[run].as_py()!r}"
        )


@dataclass
class GroupParts:
    """A group's codes as they arrive, batch by batch."""

    runs: int = 0
    run: list[np.ndarray] = field(default_factory=list)
    cell: list[np.ndarray] = field(default_factory=list)
    outcome: list[np.ndarray] = field(default_factory=list)
    first_row: list[np.ndarray] = field(default_factory=list)
    pair_ids: list[pa.Array] = field(default_factory=list)
    key: list[np.ndarray] = field(default_factory=list)

    def rows(self, name: tuple[str, str, str]) -> GroupRows:
        return GroupRows(
            name=name,
            run=np.concatenate(self.run),
            cell=np.concatenate(self.cell),
            outcome=np.concatenate(self.outcome),
            first_row=np.concatenate(self.first_row),
            pair_ids=pa.concat_arrays(self.pair_ids),
            key=np.concatenate(self.key),
        )


def _local_codes(array: pa.Array) -> tuple[np.ndarray, list[object]]:
    """(index per row into the values, the values) of a column chunk; -1 for null."""
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    indices = array.indices.fill_null(-1) if array.null_count else array.indices
    return indices.to_numpy(), array.dictionary.to_pylist()


def _changes(codes: np.ndarray) -> np.ndarray:
    """Rows (from 1) whose code differs from the row before."""
    return np.flatnonzero(codes[1:] != codes[:-1]) + 1


@dataclass
class _Batch:
    """One batch's codes, ready to join the groups (`_Encoder.add`)."""

    batch: pa.RecordBatch
    first_row: int
    """Input row (from 0) of the batch's first row."""
    local: np.ndarray
    """Per row, its group as a code local to the batch."""
    names: dict[int, tuple[object, object, object]]
    """Local group code -> (judge, config, dataset), by first appearance in the batch."""
    head: np.ndarray
    """True where a row starts a run (the first row: left to `_Encoder.add`)."""
    cell: np.ndarray
    outcome: np.ndarray
    key: np.ndarray


def _fail(batch: pa.RecordBatch, first_row: int, row: int, problem: str, where: str) -> InputError:
    r = batch.slice(row, 1).to_pylist()[0]
    pair = (
        f"judge={r['judge']!r} config={r['config']!r} dataset={r['dataset']!r} "
        f"pair {r['pair_id']!r}"
    )
    return InputError(f"{pair}: {problem}", file=where, row=first_row + row + 1)


def _local_groups(
    batch: pa.RecordBatch,
) -> tuple[np.ndarray, dict[int, tuple[object, object, object]]]:
    """(a group code local to the batch per row, each code's judge, config and dataset in
    order of first appearance)."""
    (judge, judges), (config, configs), (dataset, datasets) = (
        _local_codes(batch.column(name)) for name in _GROUP_TEXT
    )
    n_c, n_d = len(configs), len(datasets)
    if len(judges) * n_c * n_d >= 2**31:
        judge, config = judge.astype(np.int64), config.astype(np.int64)
    local = (judge * n_c + config) * n_d + dataset if n_c * n_d > 1 else judge
    firsts = np.concatenate([[0], _changes(local)])
    distinct, at = np.unique(local[firsts], return_index=True)
    names: dict[int, tuple[object, object, object]] = {}
    for value in distinct[np.argsort(at)].tolist():
        j, c, d = value // (n_c * n_d), (value // n_d) % n_c, value % n_d
        names[value] = (judges[j], configs[c], datasets[d])
    return local, names


def _coded(
    batch: pa.RecordBatch,
    first_row: int,
    where: str,
    name: str,
    mapping: dict[str, int],
    null: int = -1,
) -> np.ndarray:
    """A small-vocabulary text column as int8 codes; a foreign value names its first row."""
    codes, values = _local_codes(batch.column(name))
    lookup = np.full(len(values) + 1, -1, dtype=np.int8)
    for i, value in enumerate(values):
        lookup[i] = mapping.get(str(value), -1)
    lookup[-1] = null  # code -1 marks a null
    coded = lookup[codes]
    if (lookup[:-1] < 0).any():  # a dictionary may hold values no row uses
        bad = np.flatnonzero(coded < 0)
        if bad.size:
            row = int(bad[0])
            value = values[int(codes[row])]
            problem = f"{name} {value!r} is not one of {'|'.join(mapping)}"
            raise _fail(batch, first_row, row, problem, where)
    return coded


def _prepare(batch: pa.RecordBatch, first_row: int, where: str) -> _Batch:
    """A batch's codes, checked row by row; what needs the rows before it is left to
    `_Encoder.add`."""
    n = batch.num_rows
    for name in REPLAY_INPUT_COLUMNS:
        nulls = batch.column(name).null_count
        if nulls and name != "key":
            mask = batch.column(name).is_null().to_numpy(zero_copy_only=False)
            row = first_row + int(np.flatnonzero(mask)[0])
            raise InputError(f"column {name!r} is null", file=where, row=row + 1)
    local, names = _local_groups(batch)
    pair_id = batch.column("pair_id")
    head = np.empty(n, dtype=bool)
    if pa.types.is_dictionary(pair_id.type):
        # Equal indices are equal ids; should a dictionary repeat a value, a pair's rows
        # make two runs, which the grid joins.
        ids = pair_id.indices.to_numpy()
        head[1:] = ids[1:] != ids[:-1]
    else:
        head[1:] = pc.not_equal(pair_id.slice(1), pair_id.slice(0, n - 1)).to_numpy(
            zero_copy_only=False
        )
    if len(names) > 1:
        head[1:] |= local[1:] != local[:-1]

    seed = batch.column("seed").to_numpy(zero_copy_only=False)
    bad = np.flatnonzero((seed < 0) | (seed >= 2 * MAX_K))
    if bad.size:
        row = int(bad[0])
        raise _fail(batch, first_row, row, f"seed {int(seed[row])} is out of range", where)
    order = _coded(batch, first_row, where, "order", ORDER_INDEX)
    outcome = _coded(batch, first_row, where, "outcome", OUTCOME_CLASS)
    key = _coded(batch, first_row, where, "key", KEY_CODE, null=_KEY_NULL)
    clash = np.flatnonzero((key[1:] != key[:-1]) & ~head[1:])
    if clash.size:
        problem = "rows of the pair disagree on the key"
        raise _fail(batch, first_row, int(clash[0]) + 1, problem, where)
    cell = seed.astype(np.int8) * 2 + order
    return _Batch(batch, first_row, local, names, head, cell, outcome, key)


class _Encoder:
    """Joins prepared batches, in input order, into per-group codes; `groups` gives them at
    the end."""

    def __init__(self, where: str):
        self.where = where
        self.values: dict[str, dict[object, int]] = {name: {} for name in _GROUP_TEXT}
        self.parts: dict[int, GroupParts] = {}
        self.last: tuple[int, str, int] | None = None  # group, pair_id, key of the last row

    def add(self, coded: _Batch) -> None:
        """Add one prepared batch (the batch after the last one added)."""
        codes = {}
        for value, name in coded.names.items():
            code = 0
            for column, text in zip(_GROUP_TEXT, name, strict=True):
                seen = self.values[column]
                code = (code << _BITS) | seen.setdefault(text, len(seen))
            codes[value] = code
        local, head, key = coded.local, coded.head, coded.key
        pair_id = coded.batch.column("pair_id")
        first = (codes[int(local[0])], str(pair_id[0].as_py()))
        head[0] = self.last is None or self.last[:2] != first
        if not head[0] and self.last is not None and self.last[2] != key[0]:
            problem = "rows of the pair disagree on the key"
            raise _fail(coded.batch, coded.first_row, 0, problem, self.where)
        n = len(head)
        self.last = (codes[int(local[-1])], str(pair_id[n - 1].as_py()), int(key[-1]))
        for value, code in codes.items():
            rows = None if len(codes) == 1 else np.flatnonzero(local == value)
            self._append(code, rows, coded)

    def _append(self, code: int, rows: np.ndarray | None, coded: _Batch) -> None:
        """Add the batch's rows of one group (None: all of them) to its parts."""
        parts = self.parts.setdefault(code, GroupParts())
        head, cell, outcome = coded.head, coded.cell, coded.outcome
        if rows is not None:
            head, cell, outcome = head[rows], cell[rows], outcome[rows]
        heads = np.flatnonzero(head)
        at = heads if rows is None else rows[heads]
        parts.run.append(np.cumsum(head, dtype=np.int32) + np.int32(parts.runs - 1))
        parts.cell.append(cell)
        parts.outcome.append(outcome)
        parts.first_row.append(at + coded.first_row)
        ids = coded.batch.column("pair_id").take(pa.array(at))
        parts.pair_ids.append(ids.cast(pa.string()))
        parts.key.append(coded.key[at])
        parts.runs += len(heads)

    def groups(self) -> list[tuple[tuple[str, str, str], GroupParts]]:
        """Each group's name and parts, groups ordered by their judge, config and dataset
        first appearing (in that order of precedence)."""
        mask = (1 << _BITS) - 1
        names = {name: list(values) for name, values in self.values.items()}
        out = []
        for code in sorted(self.parts):
            index = (code >> (2 * _BITS), (code >> _BITS) & mask, code & mask)
            name = tuple(str(names[n][i]) for n, i in zip(_GROUP_TEXT, index, strict=True))
            out.append(((name[0], name[1], name[2]), self.parts.pop(code)))
        return out


def require_columns(names: list[str], where: str) -> None:
    """Refuse an input without every replay input column, naming the missing ones."""
    missing = [c for c in REPLAY_INPUT_COLUMNS if c not in names]
    if missing:
        raise InputError(f"not a replay input: missing columns {missing}", file=where)


def _checked(batch: pa.RecordBatch, where: str) -> pa.RecordBatch:
    """The replay input columns of a batch, with the types the encoder reads."""
    require_columns(batch.schema.names, where)
    columns = []
    try:
        for name in REPLAY_INPUT_COLUMNS:
            column = batch.column(name)
            if name == "seed":
                column = column.cast(pa.int64())
            elif not pa.types.is_dictionary(column.type):
                column = column.cast(pa.string())
            columns.append(column)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InputError(f"replay input columns have the wrong types: {exc}", file=where) from exc
    return pa.RecordBatch.from_arrays(columns, names=list(REPLAY_INPUT_COLUMNS))


def encode(
    batches: Iterable[pa.RecordBatch], where: str
) -> list[tuple[tuple[str, str, str], GroupParts]]:
    """Encode the replay input, batch by batch: each group's name and (still unjoined) codes,
    in group order. Raises InputError on a row-level problem, or on no rows at all.

    Batches are prepared on two threads (NumPy and Arrow release the GIL), a few ahead of
    the one being joined, so memory holds only those few besides the codes."""
    encoder = _Encoder(where)
    first_row = 0
    with ThreadPoolExecutor(THREADS) as pool:
        ahead: deque[Future[_Batch]] = deque()
        for batch in batches:
            checked = _checked(batch, where)
            if checked.num_rows:
                ahead.append(pool.submit(_prepare, checked, first_row, where))
                first_row += checked.num_rows
            if len(ahead) > THREADS:
                encoder.add(ahead.popleft().result())
        while ahead:
            encoder.add(ahead.popleft().result())
    groups = encoder.groups()
    if not groups:
        raise InputError("no rows to replay", file=where)
    return groups
