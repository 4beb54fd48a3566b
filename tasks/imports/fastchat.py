"""FastChat MT-Bench pairwise judgments (`data/mt_bench/model_judgment/<judge>_pair.jsonl`,
lm-sys/FastChat `fastchat/llm_judge`), read with the question and answer files.

Each line (`question_id, model_1, model_2, g1_winner, g2_winner, g1_judgment, g2_judgment,
judge, turn`) holds two games: g1 showed model_1 as Assistant A, g2 showed model_2 as A.
judgeline makes model_1 identity A and model_2 identity B, so g1 is display order `AB` and
g2 order `BA`. FastChat already mapped each winner to `model_1`/`model_2`/`tie` (`error`:
no label found); judgeline maps it back to the slots of that game to compare it with its
own label. A judgment `$ERROR$` is FastChat's failed call (the slot is `M`).

The judgment file holds no question or answer text: `question.jsonl` gives the turns, and
`model_answer/<model>.jsonl` each model's turns (`choices[0].turns`). A turn-1 pair is the
first question and answers; a turn-2 pair is the second question, with each answer the
model's whole conversation laid out as FastChat's multi-turn prompt shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schemas import Pair
from schemas.vocabulary import Order, SlotLabel
from tasks.errors import InputError
from tasks.hashing import canonical_json, sha256_bytes
from tasks.imports.records import (
    ImportedFile,
    Judgment,
    game_judgment,
    one_judge,
    text_or_none,
)
from tasks.ingest.fields import LoadedPairs, iter_jsonl, read_bytes, shorten

__all__ = ["read_fastchat"]

CONVENTION = (
    "FastChat llm_judge play_a_match_pair: g1 showed model_1 as Assistant A (order AB), g2 "
    "showed model_2 as Assistant A (order BA); identity A is model_1, B is model_2; "
    "g*_winner names a model, mapped back to the game's slots"
)
API_ERROR_OUTPUT = "$ERROR$"
_GAMES: tuple[tuple[str, Order, dict[str, SlotLabel]], ...] = (
    ("g1", "AB", {"model_1": "Left", "model_2": "Right", "tie": "Tie"}),
    ("g2", "BA", {"model_2": "Left", "model_1": "Right", "tie": "Tie"}),
)
MISSING_TEXTS = (
    "FastChat judgment files hold no question or answer text: give the MT-Bench question file "
    "with --questions (data/mt_bench/question.jsonl) and the folder of model answers with "
    "--answers-dir (data/mt_bench/model_answer, one <model>.jsonl per model)"
)


def _turns(value: Any, what: str, *, path: Path, row: int) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
        raise InputError(
            f"{what} must be a list of strings, got {shorten(value)}", file=str(path), row=row
        )
    return value


def _questions(path: Path) -> dict[Any, list[str]]:
    return {
        r.get("question_id"): _turns(r.get("turns"), "field 'turns'", path=path, row=row)
        for row, r in iter_jsonl(path)
    }


def _answers(
    folder: Path, model: str, cache: dict[str, dict[Any, list[str]]]
) -> dict[Any, list[str]]:
    if model not in cache:
        path = folder / f"{model}.jsonl"
        if not path.is_file():
            raise InputError(
                f"no answers of model {model!r}: {path} is not a file", file=str(folder)
            )
        cache[model] = {}
        for row, r in iter_jsonl(path):
            choices = r.get("choices")
            first = choices[0] if isinstance(choices, list) and choices else None
            turns = first.get("turns") if isinstance(first, dict) else None
            cache[model][r.get("question_id")] = _turns(
                turns, "field 'choices[0].turns'", path=path, row=row
            )
    return cache[model]


def _conversation(questions: list[str], answers: list[str], turn: int) -> str:
    if turn == 1:
        return answers[0]
    parts = [
        f"### User:\n{q}\n\n### Assistant:\n{a}"
        for q, a in zip(questions[:turn], answers[:turn], strict=True)
    ]
    return "\n\n".join(parts)


def read_fastchat(
    path: str | Path,
    *,
    questions: str | Path | None,
    answers_dir: str | Path | None,
    dataset: str | None = None,
) -> ImportedFile:
    """The pairs (model_1 = A, model_2 = B, per question and turn) and games of one file."""
    path = Path(path)
    if questions is None or answers_dir is None:
        raise InputError(MISSING_TEXTS, file=str(path))
    turns_of = _questions(Path(questions))
    answers: dict[str, dict[Any, list[str]]] = {}
    pairs: list[Pair] = []
    rows: list[int] = []
    judgments: list[Judgment] = []
    judges: set[str] = set()
    for row, record in iter_jsonl(path):
        judge = record.get("judge")
        if (
            not isinstance(judge, list)
            or len(judge) != 2
            or not all(isinstance(j, str) for j in judge)
        ):
            raise InputError(
                f"field 'judge' must be [judge model, prompt name], got {shorten(judge)}",
                file=str(path),
                row=row,
            )
        judges.add(judge[0])
        qid, turn = record.get("question_id"), record.get("turn")
        models = (record.get("model_1"), record.get("model_2"))
        if not all(isinstance(m, str) and m for m in models):
            raise InputError(
                f"fields 'model_1' and 'model_2' must name models, got {shorten(models)}",
                file=str(path),
                row=row,
            )
        if qid not in turns_of:
            raise InputError(
                f"question_id {shorten(qid)} is not in {questions}", file=str(path), row=row
            )
        question = turns_of[qid]
        if turn not in (1, 2) or turn > len(question):
            raise InputError(
                f"field 'turn' must be 1 or 2 (question {qid} has {len(question)} turns), "
                f"got {shorten(turn)}",
                file=str(path),
                row=row,
            )
        texts = []
        for model in models:
            got = _answers(Path(answers_dir), str(model), answers).get(qid)
            if got is None or len(got) < turn:
                raise InputError(
                    f"model {model!r} has no turn-{turn} answer to question {qid} in {answers_dir}",
                    file=str(path),
                    row=row,
                )
            texts.append(_conversation(question, got, turn))
        pair_id = f"{qid}-t{turn}-{models[0]}-vs-{models[1]}"
        pairs.append(
            Pair(
                pair_id=pair_id,
                dataset=dataset or "mt_bench",
                source=f"mt_bench-turn{turn}",
                question=question[turn - 1],
                answer_a=texts[0],
                answer_b=texts[1],
                metadata=canonical_json(
                    {
                        "question_id": qid,
                        "turn": turn,
                        "model_1": models[0],
                        "model_2": models[1],
                        "prompt": judge[1],
                    }
                ),
            )
        )
        rows.append(row)
        for index, (game, order, winners) in enumerate(_GAMES):
            reply = text_or_none(
                record.get(f"{game}_judgment"), file=path, row=row, field=f"{game}_judgment"
            )
            reply = None if reply == API_ERROR_OUTPUT else reply
            winner = record.get(f"{game}_winner")
            if winner not in (*winners, "error", None):
                raise InputError(
                    f"field '{game}_winner' must be model_1, model_2, tie or error, "
                    f"got {shorten(winner)}",
                    file=str(path),
                    row=row,
                )
            judgments.append(
                game_judgment(
                    pair_id,
                    order,
                    reply=reply,
                    verdict=winner,
                    label=winners.get(winner) if isinstance(winner, str) else None,
                    line=row,
                    index=index,
                )
            )
    return ImportedFile(
        tool="fastchat",
        path=path,
        sha256=sha256_bytes(read_bytes(path)),
        judge=one_judge(judges, file=path),
        config="mt_bench-pair",
        template_id="fastchat-pair-v2",
        convention=CONVENTION,
        pairs=LoadedPairs(pairs, rows),
        judgments=judgments,
    )
