"""JudgeBench judge-output files (`outputs/*.jsonl`, ScalerLab/JudgeBench `run_judge.py`).

Each line is a pair (`pair_id`, `question`, `response_A`, `response_B`, `label`, ...) plus
`judge_name` and `judgments`: the first entry judged `(question, response_A, response_B)`,
the second, when the run was not `--single_game`, `(question, response_B, response_A)`.
So the first is display order `AB` and the second `BA`. Each entry is
`{"judgment": {"judge_model", "prompt", "response"}, "decision"}` or null (the call
failed); `decision` is the verdict about the slots of that entry's own display (`A>B`: the
left answer), with `>>` folded into `>` by the arena_hard judge.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schemas.vocabulary import Order, SlotLabel
from tasks.errors import InputError
from tasks.hashing import sha256_bytes
from tasks.imports.records import (
    ImportedFile,
    Judgment,
    game_judgment,
    one_judge,
    recorded_label,
    text_or_none,
)
from tasks.ingest.fields import iter_jsonl, read_bytes, shorten
from tasks.ingest.loaders import read_judgebench

__all__ = ["JUDGES", "read_judgebench_output"]

JUDGES: dict[str, str] = {"arena_hard": "arena-hard-v1", "vanilla": "judgebench-vanilla-v1"}
"""JudgeBench judge names that judgeline reads, and the reply format of each."""

_DECISIONS: dict[str, SlotLabel] = {"A>B": "Left", "B>A": "Right", "A=B": "Tie"}
_ORDERS: tuple[Order, ...] = ("AB", "BA")
CONVENTION = (
    "JudgeBench run_judge.py: judgments[0] showed response_A first (order AB), judgments[1] "
    "showed response_B first (order BA); each decision is about its own display's slots"
)


def _judge_model(entries: list[Any], path: Path) -> str | None:
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("judgment"), dict):
            model = entry["judgment"].get("judge_model")
            if isinstance(model, str) and model:
                return model
    parts = dict(p.split("=", 1) for p in path.stem.split(",") if "=" in p)
    return parts.get("judge_model")


def _entry(entry: Any, *, path: Path, row: int, index: int) -> tuple[str | None, Any]:
    """(reply text, recorded decision) of one judgments entry; (None, None) if null."""
    if entry is None:
        return None, None
    where = f"judgments[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("judgment"), dict):
        raise InputError(
            f"{where} must be null or an object with a 'judgment' object, got {shorten(entry)}",
            file=str(path),
            row=row,
        )
    reply = text_or_none(
        entry["judgment"].get("response"), file=path, row=row, field=f"{where}.judgment.response"
    )
    return reply, entry.get("decision")


def read_judgebench_output(path: str | Path, *, dataset: str | None = None) -> ImportedFile:
    """The pairs and judgments of one JudgeBench output file (one judge, one run)."""
    path = Path(path)
    pairs = read_judgebench(path, dataset=dataset)
    judgments: list[Judgment] = []
    judge_names: set[str] = set()
    model: str | None = None
    for row, record in iter_jsonl(path):
        name = record.get("judge_name")
        if name not in JUDGES:
            raise InputError(
                f"judge_name {shorten(name)} is not one judgeline reads the replies of "
                f"(supported: {', '.join(JUDGES)})",
                file=str(path),
                row=row,
            )
        judge_names.add(name)
        entries = record.get("judgments")
        if not isinstance(entries, list) or not 1 <= len(entries) <= 2:
            raise InputError(
                f"field 'judgments' must be a list of one or two entries, got {shorten(entries)}",
                file=str(path),
                row=row,
            )
        model = model or _judge_model(entries, path)
        for index, entry in enumerate(entries):
            reply, decision = _entry(entry, path=path, row=row, index=index)
            label = recorded_label(
                _DECISIONS, decision, file=path, row=row, field=f"judgments[{index}].decision"
            )
            judgments.append(
                game_judgment(
                    record["pair_id"],
                    _ORDERS[index],
                    reply=reply,
                    verdict=decision,
                    label=label,
                    line=row,
                    index=index,
                )
            )
    name = one_judge(judge_names, file=path, field="judge_name")
    if model is None:
        raise InputError(
            "no judge model: neither judgment.judge_model nor judge_model= in the file name",
            file=str(path),
        )
    return ImportedFile(
        tool="judgebench",
        path=path,
        sha256=sha256_bytes(read_bytes(path)),
        judge=model,
        config=name,
        template_id=JUDGES[name],
        convention=CONVENTION,
        pairs=pairs,
        judgments=judgments,
    )
