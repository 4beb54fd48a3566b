"""FastChat pairwise judgments (`data/<bench>/model_judgment/<judge>_pair.jsonl`, MT-Bench
or Vicuna-bench, lm-sys/FastChat `fastchat/llm_judge`).

Each line (`question_id, model_1, model_2, g1_winner, g2_winner, g1_judgment, g2_judgment,
judge, turn`) holds two games: g1 showed model_1 as Assistant A, g2 showed model_2 as A.
judgeline makes model_1 identity A and model_2 identity B, so g1 is display order `AB` and
g2 order `BA`. FastChat already mapped each winner to `model_1`/`model_2`/`tie` (`error`:
no label found); judgeline maps it back to the slots of that game to compare it with its
own label. A judgment `$ERROR$` is FastChat's failed call (the slot is `M`).

The texts come from each line's stored prompts (`g1_user_prompt`, `g2_user_prompt`:
`fastchat_prompts`), or, with `--questions` and `--answers-dir`, from `question.jsonl` (the
turns) and `model_answer/<model>.jsonl` (each model's turns, `choices[0].turns`). A turn-1
pair is the first question and answers; a turn-2 pair is the second question, with each
answer the model's whole conversation laid out as FastChat's multi-turn prompt shows it.
Both ways give the same pairs. Identity A is model_1 (`model_a` in the pair's metadata), B
is model_2 (`model_b`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from schemas import Pair
from schemas.vocabulary import Order, SlotLabel
from tasks.errors import InputError
from tasks.hashing import canonical_json, sha256_bytes
from tasks.imports.fastchat_prompts import conversation, prompt_texts
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
ONE_OF_TWO = (
    "give both --questions (data/<bench>/question.jsonl) and --answers-dir "
    "(data/<bench>/model_answer, one <model>.jsonl per model), or neither to read the texts "
    "from each line's g1_user_prompt and g2_user_prompt"
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


class _SideFiles:
    """The texts from the MT-Bench question file and the model answer folder."""

    def __init__(self, questions: Path, answers_dir: Path) -> None:
        self.questions, self.answers_dir = questions, answers_dir
        self.turns_of = _questions(questions)
        self.answers: dict[str, dict[Any, list[str]]] = {}

    def texts(
        self, qid: Any, turn: Any, models: tuple[str, str], *, path: Path, row: int
    ) -> tuple[str, str, str]:
        """(question, model_1's answer, model_2's answer) of one line."""
        if qid not in self.turns_of:
            raise InputError(
                f"question_id {shorten(qid)} is not in {self.questions}", file=str(path), row=row
            )
        question = self.turns_of[qid]
        if turn > len(question):
            raise InputError(
                f"field 'turn' is {turn} but question {qid} has {len(question)} turns",
                file=str(path),
                row=row,
            )
        texts = []
        for model in models:
            got = _answers(self.answers_dir, model, self.answers).get(qid)
            if got is None or len(got) < turn:
                raise InputError(
                    f"model {model!r} has no turn-{turn} answer to question {qid} in "
                    f"{self.answers_dir}",
                    file=str(path),
                    row=row,
                )
            texts.append(conversation(question, got, turn))
        return question[turn - 1], texts[0], texts[1]


def _bench(path: Path) -> str:
    """The benchmark a judgment file belongs to: <bench> of data/<bench>/model_judgment/."""
    return path.parent.parent.name if path.parent.name == "model_judgment" else "mt_bench"


def read_fastchat(
    path: str | Path,
    *,
    questions: str | Path | None,
    answers_dir: str | Path | None,
    dataset: str | None = None,
) -> ImportedFile:
    """The pairs (model_1 = A, model_2 = B, per question and turn) and games of one file."""
    path = Path(path)
    if (questions is None) != (answers_dir is None):
        raise InputError(ONE_OF_TWO, file=str(path))
    side = (
        _SideFiles(Path(questions), Path(answers_dir))
        if questions is not None and answers_dir is not None
        else None
    )
    bench = _bench(path)
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
        model_1, model_2 = record.get("model_1"), record.get("model_2")
        models = (model_1, model_2)
        if not (isinstance(model_1, str) and model_1 and isinstance(model_2, str) and model_2):
            raise InputError(
                f"fields 'model_1' and 'model_2' must name models, got {shorten(models)}",
                file=str(path),
                row=row,
            )
        if turn not in (1, 2) or isinstance(turn, bool):
            raise InputError(
                f"field 'turn' must be 1 or 2, got {shorten(turn)}", file=str(path), row=row
            )
        if side is not None:
            question, answer_a, answer_b = side.texts(
                qid, turn, (model_1, model_2), path=path, row=row
            )
        else:
            question, answer_a, answer_b = prompt_texts(
                record.get("g1_user_prompt"), record.get("g2_user_prompt"), turn,
                path=path, row=row,
            )  # fmt: skip
        pair_id = f"{qid}-t{turn}-{model_1}-vs-{model_2}"
        pairs.append(
            Pair(
                pair_id=pair_id,
                dataset=dataset or bench,
                source=f"{bench}-turn{turn}",
                question=question,
                answer_a=answer_a,
                answer_b=answer_b,
                metadata=canonical_json(
                    {
                        "question_id": qid,
                        "turn": turn,
                        "model_a": model_1,
                        "model_b": model_2,
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
