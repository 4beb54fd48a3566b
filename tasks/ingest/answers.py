"""A table of answers, one row per (question, system), into pairs with trusted systems.

`judgeline freeze --answers FILE --baseline NAME` (or a dataset of kind `answers`): every
system is paired with the baseline on each question (`pairs: baseline`), or every two
systems are paired (`pairs: round-robin`). The systems of a pair are written into its
metadata (`model_a`, `model_b`), which is part of the manifest hash: after that, a slot's
system follows from the presentation map (slot -> identity) and the frozen pair (identity
-> system), never from anything a judge writes (docs/design.md#leaderboards).

Columns: `question_id`, `question`, `system` (or `model`), `answer`; optional `reference`.
Everything is checked before a pair is built; each problem is one paragraph naming the file
and rows: a system missing answers for some questions, a baseline that is not a system,
a (question, system) given twice, system names that differ only in case, one question id
with two texts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Literal, overload

from schemas import Pair
from tasks.errors import InputError
from tasks.hashing import canonical_json
from tasks.ingest.fields import LoadedPairs, required_text, shorten, text_field, type_name
from tasks.ingest.tables import iter_records

__all__ = ["PAIRINGS", "Pairing", "read_answers"]

Pairing = Literal["baseline", "round-robin"]
PAIRINGS: tuple[Pairing, ...] = ("baseline", "round-robin")
_SHOWN = 5
"""Examples a message lists before saying how many more there are."""


@dataclass(frozen=True, slots=True)
class _Answer:
    row: int
    question_id: str
    question: str
    system: str
    answer: str
    reference: str | None


Grid = dict[str, dict[str, _Answer]]
"""The answers by question id, then by system, in the order of the file."""


def _listing(items: list[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def _question_id(record: dict[str, Any], *, file: Path, row: int) -> str:
    if "question_id" not in record:
        raise InputError("missing column 'question_id'", file=str(file), row=row)
    value = record["question_id"]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(
            f"question_id must be non-empty text or an integer, got {type_name(value)} "
            f"({shorten(value)})",
            file=str(file),
            row=row,
        )
    return value


def _read_rows(path: Path) -> list[_Answer]:
    answers = []
    # One string object per distinct id, question, system and reference: each repeats once
    # per system (a million rows of answers hold a quarter of a million questions).
    same: dict[str, str] = {}
    for row, record in iter_records(path, []):
        system_column = "system" if "system" in record or "model" not in record else "model"
        reference = text_field(record, "reference", file=path, row=row, optional=True)
        answers.append(
            _Answer(
                row=row,
                question_id=same.setdefault(q := _question_id(record, file=path, row=row), q),
                question=same.setdefault(
                    q := required_text(record, "question", file=path, row=row), q
                ),
                system=same.setdefault(
                    s := required_text(record, system_column, file=path, row=row).strip(), s
                ),
                answer=required_text(record, "answer", file=path, row=row),
                reference=None if reference is None else same.setdefault(reference, reference),
            )
        )
    if not answers:
        raise InputError("no answers: the table has no rows", file=str(path))
    return answers


def _check(answers: list[_Answer], baseline: str, path: Path) -> Grid:
    """Every problem that makes the table not one answer per (question, system); the grid
    of answers if there is none."""
    file = str(path)
    by_name: dict[str, set[str]] = defaultdict(set)
    for system in {a.system for a in answers}:
        by_name[system.casefold()].add(system)
    clashes = [sorted(names) for names in by_name.values() if len(names) > 1]
    if clashes:
        shown = "; ".join(" vs ".join(repr(n) for n in names) for names in sorted(clashes))
        raise InputError(
            f"system names that differ only in case: {shown}. A leaderboard would rank them "
            "as two systems; write each system's name the same way on every row",
            file=file,
        )
    if any(a.system == "" for a in answers):
        row = next(a.row for a in answers if a.system == "")
        raise InputError("the system name is empty", file=file, row=row)
    systems = sorted({a.system for a in answers})
    if baseline not in systems:
        near = [s for s in systems if s.casefold() == baseline.casefold()]
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise InputError(
            f"the baseline {baseline!r} is not one of the table's systems{hint}; the systems are "
            f"{_listing([repr(s) for s in systems])}",
            file=file,
        )
    if len(systems) < 2:
        raise InputError(
            f"only one system ({systems[0]!r}): a leaderboard needs the baseline and at least "
            "one other system",
            file=file,
        )
    grid: Grid = {}
    duplicates = []
    for a in answers:
        first = grid.setdefault(a.question_id, {}).setdefault(a.system, a)
        if first is not a:
            duplicates.append(
                f"question {a.question_id!r}, system {a.system!r} (rows {first.row}, {a.row})"
            )
    if duplicates:
        raise InputError(
            f"{len(duplicates)} (question, system) given more than once: "
            f"{_listing(duplicates)}; keep one answer per question and system",
            file=file,
        )
    for a in answers:
        first_seen = next(iter(grid[a.question_id].values()))
        if first_seen.question != a.question or first_seen.reference != a.reference:
            field = "question" if first_seen.question != a.question else "reference"
            raise InputError(
                f"question {a.question_id!r} has a different {field} text on row {a.row} than "
                f"on row {first_seen.row}; one question id is one question",
                file=file,
                row=a.row,
            )
    missing = {s: sorted(q for q, row in grid.items() if s not in row) for s in systems}
    missing = {s: q for s, q in missing.items() if q}
    if missing:
        shown = "; ".join(
            f"{s!r} lacks {len(q)} ({_listing([repr(x) for x in q])})"
            for s, q in sorted(missing.items())
        )
        raise InputError(
            f"{len(missing)} of {len(systems)} systems miss answers for some of the "
            f"{len(grid)} questions: {shown}. Every system needs an answer to every "
            "question (drop the question or add the answer)",
            file=file,
        )
    return grid


class _Pairs(Sequence[Pair]):
    """The pairs of a checked grid, each built when it is read: a million answers make
    hundreds of thousands of pairs, and a pair model costs a kilobyte beyond its strings
    (the freeze keeps its fields only)."""

    def __init__(
        self, grid: Grid, matchups: list[tuple[str, str]], baseline: str, name: str, path: Path
    ) -> None:
        self._grid, self._questions = grid, list(grid)
        self._matchups, self._baseline, self._name, self._source = matchups, baseline, name, path
        self.rows = _Rows(self)

    def __len__(self) -> int:
        return len(self._questions) * len(self._matchups)

    def answers(self, index: int) -> tuple[str, str, str, _Answer, _Answer]:
        """The question id, systems and answers of identity A and B of pair `index`."""
        if not 0 <= index < len(self):
            raise IndexError(index)
        qid = self._questions[index // len(self._matchups)]
        system_a, system_b = self._matchups[index % len(self._matchups)]
        return qid, system_a, system_b, self._grid[qid][system_a], self._grid[qid][system_b]

    @overload
    def __getitem__(self, index: int) -> Pair: ...
    @overload
    def __getitem__(self, index: slice) -> list[Pair]: ...
    def __getitem__(self, index: int | slice) -> Pair | list[Pair]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        qid, system_a, system_b, a, b = self.answers(index if index >= 0 else index + len(self))
        metadata = {
            "question_id": qid,
            "model_a": system_a,
            "model_b": system_b,
            "role_a": "baseline" if system_a == self._baseline else "system",
            "role_b": "baseline" if system_b == self._baseline else "system",
        }
        return Pair(
            pair_id=f"{qid}:{system_a}:{system_b}",
            dataset=self._name,
            source=self._source.name,
            question=a.question,
            answer_a=a.answer,
            answer_b=b.answer,
            reference=a.reference,
            metadata=canonical_json(metadata),
        )

    def __iter__(self) -> Iterator[Pair]:
        return (self[i] for i in range(len(self)))


class _Rows(Sequence[int]):
    """The file row of each pair of `_Pairs`: its identity A's."""

    def __init__(self, pairs: _Pairs) -> None:
        self._pairs = pairs

    def __len__(self) -> int:
        return len(self._pairs)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return self._pairs.answers(index if index >= 0 else index + len(self))[3].row


def read_answers(
    path: str | Path,
    *,
    baseline: str | None,
    pairs: str | None = "baseline",
    dataset: str | None = None,
) -> LoadedPairs:
    """The pairs of an answers table: (system, baseline) per question and system, or every
    two systems per question (`round-robin`; identity A is the system first in sorted
    order). The row of a pair is its identity A's row."""
    path = Path(path)
    pairing = pairs or "baseline"
    if pairing not in PAIRINGS:
        raise InputError(
            f"pairs must be one of {', '.join(PAIRINGS)}, got {shorten(pairing)}", file=str(path)
        )
    if not baseline:
        raise InputError(
            "an answers table needs the baseline system's name (--baseline NAME)", file=str(path)
        )
    grid = _check(_read_rows(path), baseline, path)
    systems = sorted({system for answers in grid.values() for system in answers})
    if pairing == "baseline":
        matchups = [(s, baseline) for s in systems if s != baseline]
    else:
        matchups = list(combinations(systems, 2))
    built = _Pairs(grid, matchups, baseline, dataset or path.stem, path)
    return LoadedPairs(built, built.rows)
