"""Arena-Hard-Auto judgment files (`data/<bench>/model_judgment/<judge>/<model>.jsonl`,
lmarena/arena-hard-auto `gen_judgment.py`).

Each line judges one question of one model against the baseline in two games: `games[0]`
shows the baseline as Assistant A and the model as B, `games[1]` the model as A (the
baseline's place is swapped; `show_result.py` inverts `games[0]`'s score). judgeline makes
the judged model identity A and the baseline identity B, so `games[0]` is display order
`BA` and `games[1]` order `AB`. The answers exist only inside the stored prompt (v2: the
user message of `prompt`; v0.1: `user_prompt`), between the Assistant A/B answer markers.
A game is null when the judge call failed (v2); v0.1 wrote its judgment as "\n" + each
attempt's output, `$ERROR$` for a failed call, so a judgment of `$ERROR$` lines only is a
failed call too. A game's `score` (e.g. `A>>B`, about its own slots) is null when arena-hard
found no label. Question ids are `uid` (v2) or `question_id` (v0.1).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from schemas import Pair
from schemas.vocabulary import Order, SlotLabel
from tasks.errors import InputError
from tasks.hashing import canonical_json, sha256_bytes, sha256_text
from tasks.imports.records import ImportedFile, Judgment, game_judgment, one_judge
from tasks.ingest.fields import LoadedPairs, iter_jsonl, read_bytes, shorten
from tasks.prompts.templates import message_text

__all__ = ["leaderboard_seeds", "read_arenahard", "read_arenahard_dir"]

CONVENTION = (
    "arena-hard-auto gen_judgment.py: games[0] showed the baseline as Assistant A (identity "
    "B first: order BA), games[1] showed the judged model as Assistant A (order AB); "
    "identity A is the judged model, B the baseline; each score is about its own game's slots"
)
_ORDERS: tuple[Order, ...] = ("BA", "AB")
_SCORES: dict[str, SlotLabel] = {
    **dict.fromkeys(("A>B", "A>>B", "B<A", "B<<A"), "Left"),
    **dict.fromkeys(("B>A", "B>>A", "A<B", "A<<B"), "Right"),
    **dict.fromkeys(("A=B", "B=A"), "Tie"),
}
API_ERROR_OUTPUT = "$ERROR$"
"""What arena-hard v0.1 wrote for a judge call that failed after its retries."""
_USER = "<|User Prompt|>\n"
_MARKERS = (
    "\n\n<|The Start of Assistant A's Answer|>\n",
    "\n<|The End of Assistant A's Answer|>\n\n<|The Start of Assistant B's Answer|>\n",
    "\n<|The End of Assistant B's Answer|>",
)

_BARE = (
    _USER.strip(),
    *(f"<|The {e} of Assistant {s}'s Answer|>" for s in "AB" for e in ("Start", "End")),
)


def _slots(prompt: str, where: str, *, path: Path, row: int) -> tuple[str, str, str]:
    """(question, slot A answer, slot B answer) of a stored arena-hard user prompt."""
    counts = [prompt.count(m) for m in _BARE]
    if not prompt.startswith(_USER) or not prompt.endswith(_MARKERS[-1]) or counts != [1] * 5:
        raise InputError(
            f"{where}: the prompt must be '<|User Prompt|>', the question and the Assistant A "
            "and B answers between their markers, each marker once (an answer that quotes a "
            "marker makes the slots a guess)",
            file=str(path),
            row=row,
        )
    body = prompt[len(_USER) : -len(_MARKERS[-1])]
    question, _, rest = body.partition(_MARKERS[0])
    left, _, right = rest.partition(_MARKERS[1])
    if _MARKERS[0] not in body or _MARKERS[1] not in rest:
        raise InputError(
            f"{where}: the answer markers are not laid out as arena-hard writes them",
            file=str(path),
            row=row,
        )
    return question, left, right


def _game(game: Any, index: int, *, path: Path, row: int) -> tuple[str, str | None, Any] | None:
    """(user prompt, reply, score) of one game; None for a null game (the call failed)."""
    if game is None:
        return None
    where = f"games[{index}]"
    if not isinstance(game, dict):
        raise InputError(
            f"{where} must be an object or null, got {shorten(game)}", file=str(path), row=row
        )
    if "user_prompt" in game:  # v0.1
        prompt, reply = game["user_prompt"], game.get("judgment")
        if isinstance(reply, str) and _failed_attempts(reply):
            reply = None
    else:  # v2: prompt = [system, user] messages, judgment = {"answer": ...}
        messages = game.get("prompt")
        users = (
            [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
            if isinstance(messages, list)
            else []
        )
        prompt = message_text(users[-1].get("content")) if users else None
        judgment = game.get("judgment")
        reply = judgment.get("answer") if isinstance(judgment, dict) else judgment
    if not isinstance(prompt, str):
        raise InputError(
            f"{where} has no stored prompt ('prompt' user message or 'user_prompt'); the answers "
            "are only there",
            file=str(path),
            row=row,
        )
    if reply is not None and not isinstance(reply, str):
        raise InputError(
            f"{where}.judgment must hold the reply text, got {shorten(reply)}",
            file=str(path),
            row=row,
        )
    return prompt, reply, game.get("score")


def _failed_attempts(judgment: str) -> bool:
    """Whether a v0.1 judgment holds only failed attempts (`\n$ERROR$` once per attempt)."""
    lines = judgment.split("\n")
    return API_ERROR_OUTPUT in lines and set(lines) <= {"", API_ERROR_OUTPUT}


def _recorded(score: Any) -> SlotLabel | None:
    """The game's score as a slot label; None for null or a score show_result cannot read."""
    return _SCORES.get(score) if isinstance(score, str) else None


def read_arenahard(path: str | Path, *, dataset: str | None = None) -> ImportedFile:
    """The pairs (judged model = A, baseline = B) and games of one Arena-Hard judgment file."""
    path = Path(path)
    parents = path.parent.parent
    bench = parents.parent.name if parents.name == "model_judgment" else "arena-hard"
    pairs: list[Pair] = []
    rows: list[int] = []
    judgments: list[Judgment] = []
    judges: set[str] = set()
    for row, record in iter_jsonl(path):
        qid = record.get("uid", record.get("question_id"))
        if not isinstance(qid, str | int) or isinstance(qid, bool):
            raise InputError(
                f"field 'uid' (or 'question_id') must be a string or integer, got {shorten(qid)}",
                file=str(path),
                row=row,
            )
        model = record.get("model") or path.stem
        judges.add(str(record.get("judge") or path.parent.name))
        games = record.get("games")
        if not isinstance(games, list) or len(games) != 2:
            raise InputError(
                f"field 'games' must be a list of two games, got {shorten(games)}",
                file=str(path),
                row=row,
            )
        read = [_game(g, i, path=path, row=row) for i, g in enumerate(games)]
        # Identity texts (question, model's answer, baseline's answer) seen by each game.
        seen = set()
        for index, game in enumerate(read):
            if game is not None:
                question, left, right = _slots(game[0], f"games[{index}]", path=path, row=row)
                seen.add(
                    (question, right, left) if _ORDERS[index] == "BA" else (question, left, right)
                )
        if len(seen) != 1:
            raise InputError(
                "both games are null, so the answers are unknown"
                if not seen
                else "games[0] and games[1] do not show the same question and the same two answers "
                "in swapped places",
                file=str(path),
                row=row,
            )
        ((question, answer_a, answer_b),) = seen
        metadata = {
            "model_a": model,
            "role_a": "judged model",
            "model_b": record.get("baseline"),  # v0.1 lines do not name the baseline
            "role_b": "baseline",
            "category": record.get("category"),
        }
        pairs.append(
            Pair(
                pair_id=str(qid),
                dataset=dataset or f"{bench}-{model}",
                source=str(record.get("category") or bench),
                question=question,
                answer_a=answer_a,
                answer_b=answer_b,
                metadata=canonical_json({k: v for k, v in metadata.items() if v is not None}),
            )
        )
        rows.append(row)
        for index, game in enumerate(read):
            reply, score = (game[1], game[2]) if game is not None else (None, None)
            judgments.append(
                game_judgment(
                    str(qid),
                    _ORDERS[index],
                    reply=reply,
                    verdict=score,
                    label=_recorded(score),
                    line=row,
                    index=index,
                )
            )
    return ImportedFile(
        tool="arena-hard",
        path=path,
        sha256=sha256_bytes(read_bytes(path)),
        judge=one_judge(judges, file=path),
        config=bench,
        template_id="arena-hard-v1",
        convention=CONVENTION,
        pairs=LoadedPairs(pairs, rows),
        judgments=judgments,
    )


def read_arenahard_dir(
    folder: str | Path, *, dataset: str | None = None, baseline: str | None = None
) -> ImportedFile:
    """Every judged model of an Arena-Hard judgment folder (`model_judgment/<judge>/`, one
    `<model>.jsonl` per model) as one import: one pair per (question, model) against the
    baseline, id `question:model:baseline`, with both systems in its metadata, so a
    leaderboard ranks them (docs/design.md#leaderboards). The baseline is the one the lines
    name (v2), else `baseline` (v0.1 lines name none)."""
    folder = Path(folder)
    paths = sorted(folder.glob("*.jsonl"))
    if not paths:
        raise InputError("no <model>.jsonl judgment files in the folder", file=str(folder))
    files = [read_arenahard(path, dataset=dataset) for path in paths]
    return _leaderboard(files, folder, dataset=dataset, baseline=baseline)


def _models(file: ImportedFile) -> tuple[str, ...]:
    return tuple(sorted({json.loads(p.metadata)["model_a"] for p in file.pairs.pairs}))


def leaderboard_seeds(
    files: list[ImportedFile], *, dataset: str | None = None, baseline: str | None = None
) -> list[ImportedFile]:
    """Arena-Hard judgment files given one by one, as seeds: the files of one judged model are
    its repeated runs (one seed each, in the order given); files of several models (the
    `model_judgment/<judge>/*.jsonl` of a folder) are one leaderboard, as their folder is,
    and seed s holds each model's s-th file. A folder given is a seed already."""
    if any(f.path.is_dir() for f in files):
        return files
    by_model: dict[tuple[str, ...], list[ImportedFile]] = {}
    for file in files:
        by_model.setdefault(_models(file), []).append(file)
    if len(by_model) < 2:
        return files
    runs = {len(group) for group in by_model.values()}
    if len(runs) > 1:
        common = max(runs, key=lambda n: sum(len(g) == n for g in by_model.values()))
        odd, group = next((m, g) for m, g in by_model.items() if len(g) != common)
        raise InputError(
            f"the files judge {len(by_model)} models, one leaderboard run, but model "
            f"{', '.join(map(repr, odd))} has {len(group)} file{'s' * (len(group) != 1)} "
            f"({', '.join(str(f.path) for f in group)}) and the others {common}: give each "
            "model one file per repeated run (seed), or the model_judgment/<judge>/ folder",
            file=str(group[-1].path),
        )
    seeds = []
    for s in range(runs.pop()):
        chosen = sorted((group[s] for group in by_model.values()), key=lambda f: f.path)
        folder = Path(os.path.commonpath([f.path.parent for f in chosen]))
        seeds.append(_leaderboard(chosen, folder, dataset=dataset, baseline=baseline))
    return seeds


def _leaderboard(
    files: list[ImportedFile], folder: Path, *, dataset: str | None, baseline: str | None
) -> ImportedFile:
    """The judgment files of several models, of one judge and run, as one import (`folder`:
    where they are)."""
    for other in files[1:]:
        if (other.judge, other.config) != (files[0].judge, files[0].config):
            raise InputError(
                f"judge {other.judge!r} here but {files[0].judge!r} in {files[0].path}: one "
                "leaderboard run holds one judge's judgments",
                file=str(other.path),
            )
    pairs: list[Pair] = []
    rows: list[int] = []
    judgments: list[Judgment] = []
    named: set[str] = set()
    for file in files:
        renamed: dict[str, str] = {}
        for pair, row in zip(file.pairs.pairs, file.pairs.rows, strict=True):
            meta = json.loads(pair.metadata)
            base = meta.get("model_b") or baseline
            if not base:
                raise InputError(
                    "the judgment lines do not name the baseline (Arena-Hard v0.1); give "
                    "--baseline NAME",
                    file=str(file.path),
                    row=row,
                )
            named.add(base)
            meta.update(model_b=base, question_id=pair.pair_id)
            renamed[pair.pair_id] = f"{pair.pair_id}:{meta['model_a']}:{base}"
            pairs.append(
                pair.model_copy(
                    update={
                        "pair_id": renamed[pair.pair_id],
                        "dataset": dataset or file.config,
                        "metadata": canonical_json(meta),
                    }
                )
            )
            rows.append(row)
        judgments += [
            replace(j, pair_id=renamed[j.pair_id], source=file.path, source_sha256=file.sha256)
            for j in file.judgments
        ]
    if len(named) > 1:
        raise InputError(
            f"the files name {len(named)} baselines ({', '.join(sorted(named))}): a "
            "leaderboard fixes one",
            file=str(folder),
        )
    return ImportedFile(
        tool="arena-hard",
        path=folder,
        sha256=sha256_text(canonical_json([[f.path.name, f.sha256] for f in files])),
        judge=files[0].judge,
        config=files[0].config,
        template_id=files[0].template_id,
        convention=CONVENTION,
        pairs=LoadedPairs(pairs, rows),
        judgments=judgments,
    )
