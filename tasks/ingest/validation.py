"""Pairs checked before freezing: every field present, text valid Unicode, ids unique."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from schemas import Pair
from tasks.errors import InputError

__all__ = ["LONGEST_PROMPT_TOKENS", "SourcePairs", "check_sources", "validate_sources"]

_TEXT_FIELDS = ("pair_id", "dataset", "source", "question", "answer_a", "answer_b")
_OPTIONAL_TEXT_FIELDS = ("reference", "rubric_revision", "metadata")

SourcePairs = tuple[str, Sequence[Any]] | tuple[str, Sequence[Any], Sequence[int]]
"""Pairs to freeze: (label, pairs) or (label, pairs, rows). The label names the file (or
generator) in the sidecar and in errors; `rows[i]` is the 1-based row of that file that
`pairs[i]` came from, and defaults to the pair's position in `pairs`."""


def _unicode_problem(name: str, value: str) -> str | None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{name} is not encodable as UTF-8 (unpaired surrogate at character {exc.start})"
    return None


def _pair_problems(pair: Pair) -> list[str]:
    """Everything wrong with one pair; Pair objects built with model_construct skip
    pydantic's checks, so the contract is re-checked here field by field."""
    problems: list[str] = []
    for name in _TEXT_FIELDS:
        value = getattr(pair, name, None)
        if not isinstance(value, str):
            problems.append(f"{name} is missing")
            continue
        if name in ("answer_a", "answer_b", "pair_id"):
            if value == "":
                problems.append(f"{name} is empty")
            elif not value.strip():
                problems.append(f"{name} is whitespace-only")
        problem = _unicode_problem(name, value)
        if problem:
            problems.append(problem)
    for name in _OPTIONAL_TEXT_FIELDS:
        value = getattr(pair, name, None)
        if value is None and name == "reference":
            continue
        if not isinstance(value, str):
            problems.append(f"{name} is not text")
            continue
        problem = _unicode_problem(name, value)
        if problem:
            problems.append(problem)
    key = getattr(pair, "key", None)
    if key not in ("A", "B", None):
        problems.append(f"key {key!r} is not A, B or empty")
    return problems


def _as_pair(item: Any, source: str, row: int) -> Pair:
    if isinstance(item, Pair):
        return item
    if isinstance(item, Mapping):
        try:
            return Pair.model_validate(dict(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "row"
            raise InputError(f"{where}: {first['msg']}", file=source, row=row) from None
    raise InputError(f"not a pair: {type(item).__name__}", file=source, row=row)


def _rows(source: SourcePairs) -> Sequence[int]:
    """The file row of each pair of a source (its position when the source gives none)."""
    if len(source) == 3:
        label, items, rows = source
        if len(rows) != len(items):
            raise ValueError(f"source {label}: {len(items)} pairs but {len(rows)} rows")
        return rows
    return range(1, len(source[1]) + 1)


LONGEST_PROMPT_TOKENS = 2_097_152
"""The largest context window of a judge model today, in tokens (Gemini 1.5 Pro's and 3.5
Pro's; most judges take 128,000 to 1,048,576). A pair whose question, answers and reference
are estimated past it (four characters a token, as `estimate` counts) is kept, and warned of:
no judge can be sent it."""


def check_sources(
    sources: Sequence[SourcePairs], keep: Callable[[Pair], None]
) -> tuple[list[str], list[str]]:
    """Check every pair before anything is written, handing each to `keep` in order (the
    caller decides what to keep of it); return the warnings: one per pair with identical
    answers, then the others (one line each, whatever the number of pairs).

    The first problem is raised as an InputError naming its source and the pair's row in
    it; any further problems are summarised in the same message so one run shows the
    extent of the damage.
    """
    errors: list[InputError] = []
    warnings: list[str] = []
    seen: dict[str, int] = {}
    """The position of each pair id's first pair (`rows`, `starts`, `labels` say where)."""
    rows: list[int] = []
    starts: list[int] = []
    labels: list[str] = []
    too_long: list[str] = []
    for entry in sources:
        source, items = entry[0], entry[1]
        starts.append(len(rows))
        labels.append(source)
        for item, row in zip(items, _rows(entry), strict=True):
            try:
                pair = _as_pair(item, source, row)
            except InputError as exc:
                errors.append(exc)
                continue
            for problem in _pair_problems(pair):
                errors.append(InputError(f"pair {pair.pair_id!r}: {problem}", file=source, row=row))
            first = seen.setdefault(pair.pair_id, len(rows))
            if first != len(rows):
                where = labels[bisect.bisect_right(starts, first) - 1]
                errors.append(
                    InputError(
                        f"duplicate pair id {pair.pair_id!r}: already at {where} row {rows[first]}",
                        file=source,
                        row=row,
                    )
                )
            if isinstance(pair.answer_a, str) and pair.answer_a == pair.answer_b:
                warnings.append(
                    f"{source}, row {row}: pair {pair.pair_id!r} has byte-identical answers "
                    "A and B (kept)"
                )
            tokens = _prompt_tokens(pair)
            if tokens > LONGEST_PROMPT_TOKENS:
                too_long.append(f"{source}, row {row} (pair {pair.pair_id!r}, ~{tokens:,} tokens)")
            rows.append(row)
            keep(pair)
    if errors:
        head = errors[0]
        problem = head.problem
        if len(errors) > 1:
            more = "; ".join(str(e) for e in errors[1:4])
            extra = f" and {len(errors) - 4} more" if len(errors) > 4 else ""
            problem += f" (also: {more}{extra})"
        raise InputError(problem, file=head.file, row=head.row)
    if not rows:
        raise InputError("no pairs to freeze", file=", ".join(s[0] for s in sources) or None)
    others = []
    if too_long:
        more = f" and {len(too_long) - 1} more" if len(too_long) > 1 else ""
        others.append(
            f"{len(too_long)} {'pair is' if len(too_long) == 1 else 'pairs are'} longer than "
            f"any judge takes: {too_long[0]}{more}, "
            f"where the largest context window of a judge model is {LONGEST_PROMPT_TOKENS:,} "
            "tokens (four characters a token). They are kept; every call of them will fail"
        )
    return warnings, others


def _prompt_tokens(pair: Pair) -> int:
    """A pair's question, answers and reference in tokens, four characters a token."""
    texts = (pair.question, pair.answer_a, pair.answer_b, pair.reference)
    return sum(len(t) for t in texts if isinstance(t, str)) // 4


def validate_sources(sources: Sequence[SourcePairs]) -> tuple[list[Pair], list[str]]:
    """`check_sources`, keeping every pair: the pairs and the warnings."""
    pairs: list[Pair] = []
    identical, others = check_sources(sources, pairs.append)
    return pairs, identical + others
