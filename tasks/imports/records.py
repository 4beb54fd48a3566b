"""What a format reader hands the run builder: pairs, and judgments placed by display order."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemas.vocabulary import Order, SlotLabel
from tasks.errors import InputError
from tasks.ingest.fields import LoadedPairs, shorten

__all__ = [
    "ImportedFile",
    "Judgment",
    "game_judgment",
    "one_judge",
    "recorded_label",
    "text_or_none",
]


@dataclass(frozen=True)
class Judgment:
    """One reply of the file, with the display it was made on.

    `order` is the presentation the reply saw, derived from the tool's documented order
    convention: `AB` when identity A sat in the left (first) slot. `reply` is None when the
    tool recorded no reply (its call failed): the slot is then `M`. `recorded_label` is the
    file's own verdict read as a slot label of that display (None: the file records none).
    """

    pair_id: str
    order: Order
    reply: str | None
    recorded_verdict: str | None
    recorded_label: SlotLabel | None
    line: int
    index: int
    source: Path | None = None
    """The file the judgment is in, when the import read several (else the import's path)."""
    source_sha256: str | None = None


@dataclass(frozen=True)
class ImportedFile:
    """One judgment file read by a format reader: who judged, under which reply format, and
    the pairs and judgments it holds (both in file order)."""

    tool: str
    path: Path
    sha256: str
    judge: str
    config: str
    template_id: str
    convention: str
    pairs: LoadedPairs
    judgments: list[Judgment]
    part: int = 0
    """Which seed of its file this is: a judgments table holds several, other formats one."""


def game_judgment(
    pair_id: str,
    order: Order,
    *,
    reply: str | None,
    verdict: Any,
    label: SlotLabel | None,
    line: int,
    index: int,
) -> Judgment:
    """The judgment of one game: the file's verdict is kept when it is text, and its label
    counts only for a game with a reply (a failed call's slot is `M` whatever it records)."""
    return Judgment(
        pair_id=pair_id,
        order=order,
        reply=reply,
        recorded_verdict=verdict if isinstance(verdict, str) else None,
        recorded_label=label if reply is not None else None,
        line=line,
        index=index,
    )


def one_judge(judges: set[str], *, file: Path, field: str = "judge") -> str:
    """The one judge a file names in `field` over its lines; an error for none or several."""
    if len(judges) != 1:
        raise InputError(
            f"one judge per file: found {field} {sorted(judges) or 'none'}", file=str(file)
        )
    (judge,) = judges
    return judge


def recorded_label(
    verdicts: dict[str, SlotLabel], value: Any, *, file: Path, row: int, field: str
) -> SlotLabel | None:
    """The file's recorded verdict as a slot label; None for null or a verdict no label reads
    (tools record whatever their pattern matched, e.g. JudgeBench's `A>A`: the reply is kept
    and judgeline's parser reads it). A verdict that is not text is an error."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(
            f"field {field!r} must be a string or null, got {shorten(value)}",
            file=str(file),
            row=row,
        )
    return verdicts.get(value)


def text_or_none(value: Any, *, file: Path, row: int, field: str) -> str | None:
    """A reply text field: a string, or null for a call the tool recorded as failed."""
    if value is None or isinstance(value, str):
        return value
    raise InputError(
        f"field {field!r} must be a string or null, got {shorten(value)}", file=str(file), row=row
    )
