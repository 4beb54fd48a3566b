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
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Literal

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


@dataclass(frozen=True)
class _Answer:
    row: int
    question_id: str
    question: str
    system: str
    answer: str
    reference: str | None


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
    for row, record in iter_records(path, []):
        system_column = "system" if "system" in record or "model" not in record else "model"
        answers.append(
            _Answer(
                row=row,
                question_id=_question_id(record, file=path, row=row),
                question=required_text(record, "question", file=path, row=row),
                system=required_text(record, system_column, file=path, row=row).strip(),
                answer=required_text(record, "answer", file=path, row=row),
                reference=text_field(record, "reference", file=path, row=row, optional=True),
            )
        )
    if not answers:
        raise InputError("no answers: the table has no rows", file=str(path))
    return answers


def _check(answers: list[_Answer], baseline: str, path: Path) -> None:
    """Every problem that makes the table not one answer per (question, system)."""
    file = str(path)
    by_name: dict[str, set[str]] = defaultdict(set)
    for a in answers:
        by_name[a.system.casefold()].add(a.system)
    clashes = [sorted(names) for names in by_name.values() if len(names) > 1]
    if clashes:
        shown = "; ".join(" vs ".join(repr(n) for n in names) for names in clashes)
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
    seen: dict[tuple[str, str], int] = {}
    duplicates = []
    for a in answers:
        first = seen.setdefault((a.question_id, a.system), a.row)
        if first != a.row:
            duplicates.append(
                f"question {a.question_id!r}, system {a.system!r} (rows {first}, {a.row})"
            )
    if duplicates:
        raise InputError(
            f"{len(duplicates)} (question, system) given more than once: "
            f"{_listing(duplicates)}; keep one answer per question and system",
            file=file,
        )
    texts: dict[str, _Answer] = {}
    for a in answers:
        first_seen = texts.setdefault(a.question_id, a)
        if first_seen.question != a.question or first_seen.reference != a.reference:
            field = "question" if first_seen.question != a.question else "reference"
            raise InputError(
                f"question {a.question_id!r} has a different {field} text on row {a.row} than "
                f"on row {first_seen.row}; one question id is one question",
                file=file,
                row=a.row,
            )
    questions = set(texts)
    answered: dict[str, set[str]] = defaultdict(set)
    for a in answers:
        answered[a.system].add(a.question_id)
    missing = {s: sorted(questions - answered[s]) for s in systems if questions - answered[s]}
    if missing:
        shown = "; ".join(
            f"{s!r} lacks {len(q)} ({_listing([repr(x) for x in q])})"
            for s, q in sorted(missing.items())
        )
        raise InputError(
            f"{len(missing)} of {len(systems)} systems miss answers for some of the "
            f"{len(questions)} questions: {shown}. Every system needs an answer to every "
            "question (drop the question or add the answer)",
            file=file,
        )


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
    answers = _read_rows(path)
    _check(answers, baseline, path)
    by_key = {(a.question_id, a.system): a for a in answers}
    questions = list(dict.fromkeys(a.question_id for a in answers))
    systems = sorted({a.system for a in answers})
    if pairing == "baseline":
        matchups = [(s, baseline) for s in systems if s != baseline]
    else:
        matchups = list(combinations(systems, 2))
    name = dataset or path.stem
    built: list[Pair] = []
    rows: list[int] = []
    for qid in questions:
        for system_a, system_b in matchups:
            a, b = by_key[(qid, system_a)], by_key[(qid, system_b)]
            metadata = {
                "question_id": qid,
                "model_a": system_a,
                "model_b": system_b,
                "role_a": "baseline" if system_a == baseline else "system",
                "role_b": "baseline" if system_b == baseline else "system",
            }
            built.append(
                Pair(
                    pair_id=f"{qid}:{system_a}:{system_b}",
                    dataset=name,
                    source=path.name,
                    question=a.question,
                    answer_a=a.answer,
                    answer_b=b.answer,
                    reference=a.reference,
                    metadata=canonical_json(metadata),
                )
            )
            rows.append(a.row)
    return LoadedPairs(built, rows)
