"""The replay's Arrow tables, built from the compact result (`tasks.replay.compact`).

Per-pair tables (replay, design) are made of one record batch per label (design, or design
and policy) of a one-group result, in row order label -> pair; a design's expected agreement
is a column of its own per pair. Text columns are slices of
constant arrays or of the pair ids. A float column that is the same for every pattern row
(e.g. the full policy's 0 chance of a change) is a slice of a constant array; any other is
one vectorised gather of the pattern rows by the pairs' codes, made once and shared by every
label whose pattern column is identical (e.g. a design's reference score), on two threads
(the gathers release the GIL). Summary and component tables come from count-weighted
pattern means.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from schemas import ComponentRow, DesignRow, ReplayRow, SummaryRow, arrow_schema
from tasks.replay.compact import THREADS, VALUE_COLUMNS, Compact
from tasks.replay.designs import component_costs
from tasks.replay.matching import cost_to_match

__all__ = [
    "Constants",
    "component_table",
    "design_batches",
    "replay_batches",
    "summary_table",
]


class Constants:
    """Constant columns: one array per value, grown as needed and sliced for every batch
    that repeats it.

    With `text_as_dictionary`, a constant text column is a one-value dictionary array
    (indices all 0) and `schema` gives batch schemas to match: a parquet writer takes its
    indices as they are instead of hashing every row's text (a fifth of the time a
    per-pair table takes to write)."""

    def __init__(self, *, text_as_dictionary: bool = False) -> None:
        self.arrays: dict[str | bytes, pa.Array] = {}
        self.text_as_dictionary = text_as_dictionary
        self.zeros = pa.array(np.zeros(0, dtype=np.int32))

    def __call__(self, value: str | float, length: int) -> pa.Array:
        if isinstance(value, str) and self.text_as_dictionary:
            if len(self.zeros) < length:
                self.zeros = pa.array(np.zeros(length, dtype=np.int32))
            return pa.DictionaryArray.from_arrays(self.zeros.slice(0, length), pa.array([value]))
        # A float by its bits: 0.0 and -0.0 are different constants.
        key = value if isinstance(value, str) else np.float64(value).tobytes()
        array = self.arrays.get(key)
        if array is None or len(array) < length:
            kind = pa.string() if isinstance(value, str) else pa.float64()
            array = self.arrays[key] = pa.repeat(pa.scalar(value, kind), length)
        return array.slice(0, length)

    def schema(self, schema: pa.Schema) -> pa.Schema:
        """`schema` as this object's batches hold it: with `text_as_dictionary`, every text
        column but pair_id as a dictionary."""
        if not self.text_as_dictionary:
            return schema
        dictionary = pa.dictionary(pa.int32(), pa.string())
        return pa.schema(
            [
                field.with_type(dictionary)
                if field.type == pa.string() and field.name != "pair_id"
                else field
                for field in schema
            ],
            metadata=schema.metadata,
        )


def _sources(floats: np.ndarray) -> dict[tuple[int, int], float | tuple[int, int]]:
    """For each (column, label) of `floats` (columns, labels, rows): its value if it is the
    same on every row, else the first (column, label) holding the very same values."""
    sources: dict[tuple[int, int], float | tuple[int, int]] = {}
    first: dict[bytes, tuple[int, int]] = {}
    for li in range(floats.shape[1]):
        for c in range(floats.shape[0]):
            values = floats[c, li]
            if (values == values[0]).all():
                sources[(c, li)] = float(values[0])
            else:
                sources[(c, li)] = first.setdefault(values.tobytes(), (c, li))
    return sources


def _batches(
    compact: Compact,
    labels: Sequence[tuple[str, ...]],
    floats: np.ndarray,
    schema: pa.Schema,
    constant: Constants,
    per_pair: np.ndarray | None = None,
) -> Iterator[pa.RecordBatch]:
    """Record batches in row order label -> pair; `floats` is (columns, labels, rows), and
    `per_pair` (labels, pairs), if given, is the last column."""
    grid = compact.grid
    n = len(compact.code)
    sources = _sources(floats)
    # Each gathered column is made when a label first needs it and let go after its last one,
    # so a group's batches never hold every gathered column at once.
    last: dict[tuple[int, int], int] = {}
    for (_, li), source in sources.items():
        if isinstance(source, tuple):
            last[source] = max(last.get(source, -1), li)
    gathered: dict[tuple[int, int], pa.Array] = {}
    text = [constant(name, n) for name in grid.name]
    text.append(grid.pair_ids)
    with ThreadPoolExecutor(THREADS) as pool:
        for li, label in enumerate(labels):
            wanted = sorted(
                {s for (_, at), s in sources.items() if at == li and isinstance(s, tuple)}
                - gathered.keys()
            )
            taken = pool.map(lambda at: pa.array(np.take(floats[at], compact.code)), wanted)
            gathered.update(zip(wanted, taken, strict=True))
            columns = [*text, *(constant(name, n) for name in label)]
            for c in range(floats.shape[0]):
                source = sources[(c, li)]
                columns.append(
                    gathered[source] if isinstance(source, tuple) else constant(source, n)
                )
            if per_pair is not None:
                columns.append(pa.array(per_pair[li]))
            yield pa.RecordBatch.from_arrays(columns, schema=schema)
            for source in [s for s in gathered if last[s] == li]:
                del gathered[source]


def replay_batches(
    compact: Compact, combos: list[tuple[str, str]], constant: Constants
) -> Iterator[pa.RecordBatch]:
    """ReplayRow batches without the money column (`tasks.replay.money` adds it)."""
    schema = constant.schema(arrow_schema(ReplayRow, added=False))
    return _batches(compact, combos, compact.values, schema, constant)


def design_batches(
    compact: Compact, designs: list[str], constant: Constants
) -> Iterator[pa.RecordBatch]:
    """DesignRow batches (expected_agreement, the last column, is kept per pair)."""
    labels = [(d,) for d in designs]
    schema = constant.schema(arrow_schema(DesignRow))
    return _batches(compact, labels, compact.design, schema, constant, compact.agreement)


def summary_table(
    compact: Compact, combos: list[tuple[str, str]], component_means: dict[str, np.ndarray]
) -> pa.Table:
    """The group's policy means, with the cost to match from its component means."""
    grid = compact.grid
    judge, config, dataset = grid.name
    means = compact.means(compact.values)  # (columns, combos)
    rows = []
    for ci, (design, policy) in enumerate(combos):
        mean = {name: float(means[vi, ci]) for vi, name in enumerate(VALUE_COLUMNS)}
        row: dict[str, object] = {
            "judge": judge,
            "config": config,
            "dataset": dataset,
            "design": design,
            "policy": policy,
            "pairs": len(grid.pair_ids),
            **mean,
            "savings": 1.0 - mean["expected_calls"] / grid.k,
            "match_cost": None,
            "match_extra": None,
        }
        if policy != "full":
            costs = component_costs(design, grid.k)
            agreements = component_means[design][: len(costs)]
            cost = cost_to_match(costs.tolist(), agreements.tolist(), 1.0 - mean["p_change"])
            if not math.isnan(cost):
                row["match_cost"] = cost
                row["match_extra"] = cost / mean["expected_calls"] - 1.0
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=arrow_schema(SummaryRow))


def component_table(compact: Compact, component_means: dict[str, np.ndarray]) -> pa.Table:
    """Mean agreement of each nonadaptive component of the group, per design."""
    judge, config, dataset = compact.grid.name
    k = compact.grid.k
    rows = []
    for design, means in component_means.items():
        costs = component_costs(design, k)
        names = [f"k={size}" for size in range(1, k + 1)] + ["balanced pair"]
        for ci, cost in enumerate(costs.tolist()):
            rows.append(
                {
                    "judge": judge,
                    "config": config,
                    "dataset": dataset,
                    "design": design,
                    "component": names[ci],
                    "cost": cost,
                    "agreement": float(means[ci]),
                }
            )
    return pa.Table.from_pylist(rows, schema=arrow_schema(ComponentRow))
