"""A FastChat `*_pair.jsonl` holding many models against one baseline: one run, ranked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tasks.imports import ImportOptions, build_import, read_seeds
from tasks.ingest.manifest import read_manifest
from tasks.leaderboard import BoardOptions, leaderboard_of
from tasks.remap import remap_run, write_remap
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "imports"))
from test_fastchat import write  # noqa: E402

pytestmark = pytest.mark.slow

BASELINE = "gpt-3.5-turbo"
MODELS = {"m-strong": 0.9, "m-mid": 0.6, "m-weak": 0.25}
"""Probability that the judge prefers the model's answer over the baseline's."""


def _mt_bench(root: Path, rng: np.random.Generator) -> tuple[Path, Path, Path]:
    data = root / "mt_bench"
    ids = range(101, 117)
    questions = write(data / "question.jsonl", [
        {"question_id": q, "category": "writing", "turns": [f"Q{q} one?", f"Q{q} two?"]}
        for q in ids
    ])  # fmt: skip
    for model in [*MODELS, BASELINE]:
        write(data / "model_answer" / f"{model}.jsonl", [
            {"question_id": q, "answer_id": "x", "model_id": model,
             "choices": [{"index": 0, "turns": [f"{model} {q} a", f"{model} {q} b"]}]}
            for q in ids
        ])  # fmt: skip
    lines: list[dict[str, Any]] = []
    for model, p in MODELS.items():
        for q in ids:
            for turn in (1, 2):
                # g1 shows model_1 as Assistant A, g2 shows model_2 (the baseline) as A
                g1 = ("model_1", "[[A]]") if rng.random() < p else ("model_2", "[[B]]")
                g2 = ("model_1", "[[B]]") if rng.random() < p else ("model_2", "[[A]]")
                lines.append({
                    "question_id": q, "model_1": model, "model_2": BASELINE,
                    "g1_winner": g1[0], "g2_winner": g2[0], "judge": ["judge-x", "pair-v2"],
                    "g1_user_prompt": "…", "g1_judgment": g1[1], "g2_user_prompt": "…",
                    "g2_judgment": g2[1], "turn": turn, "tstamp": 0.0,
                })  # fmt: skip
    pairs = write(data / "model_judgment" / "judge-x_pair.jsonl", lines)
    return pairs, questions, data / "model_answer"


def test_a_pair_file_of_many_models_is_one_leaderboard(tmp_path: Path) -> None:
    path, questions, answers = _mt_bench(tmp_path, np.random.default_rng(8))
    options = ImportOptions(questions=str(questions), answers_dir=str(answers))
    (seed,) = read_seeds("fastchat", path, options)
    work = WorkDir.at(tmp_path / "work")
    built = build_import(work, [seed], "fc")
    write_remap(work, remap_run(work, "fc"))
    _, manifest = read_manifest(work, built.manifest_hash)
    outcomes = pd.read_parquet(RunFolder(work, "fc").outcomes)
    board_options = BoardOptions(baseline=BASELINE, replicates=200)
    (board,) = leaderboard_of(outcomes, manifest, board_options)
    assert board["questions"] == 16  # both turns of a question are drawn together
    assert [r["system"] for r in board["systems"]] == ["m-strong", "m-mid", BASELINE, "m-weak"]
    rows = {r["system"]: r for r in board["systems"]}
    assert rows["m-strong"]["wins"] + rows["m-strong"]["ties"] + rows["m-strong"]["losses"] == 32
