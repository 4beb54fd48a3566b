"""An Arena-Hard-Auto judgment folder (one file per model) imported as one run, ranked."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from simulated_boards import arena_hard_elo

from tasks.errors import InputError
from tasks.imports import ImportOptions, build_import, check_files, read_files, read_seeds
from tasks.ingest.manifest import read_manifest
from tasks.leaderboard import BoardOptions, leaderboard_of
from tasks.remap import remap_run, write_remap
from tasks.runs.folder import RunFolder
from tasks.store.workdir import WorkDir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "imports"))
from test_arenahard import game_v2, write  # noqa: E402

from tests.flows.test_hostile_input import run_main  # noqa: E402

pytestmark = pytest.mark.slow

MODELS = {"m-alpha": 0.5, "m-beta": 0.25, "m-gamma": 0.0, "m-delta": -0.25, "m-eps": -0.5}
QUESTIONS = 20
VERDICTS = ("A>>B", "A>B", "A=B", "B>A", "B>>A")


def _folder(root: Path, rng: np.random.Generator, *, baseline: str | None = "base-b") -> Path:
    """model_judgment/judge-x/<model>.jsonl in Arena-Hard-Auto v2's layout: games[0] shows
    the baseline as Assistant A, games[1] the model."""
    folder = root / "arena-hard-v2.0" / "model_judgment" / "judge-x"
    for model, strength in MODELS.items():
        lines = []
        for q in range(QUESTIONS):
            question, mine, theirs = f"Question {q}?", f"{model} on {q}", f"baseline on {q}"
            games = []
            for first, second, sign in ((theirs, mine, -1), (mine, theirs, 1)):
                weights = np.exp(sign * strength * np.array([2, 1, 0, -1, -2]))
                verdict = str(rng.choice(VERDICTS, p=weights / weights.sum()))
                games.append(game_v2(question, first, second, f"Verdict: [[{verdict}]]", verdict))
            line = {"uid": f"q{q}", "category": "hard_prompt", "judge": "judge-x",
                    "model": model, "games": games}  # fmt: skip
            if baseline:
                line["baseline"] = baseline
            lines.append(line)
        write(folder / f"{model}.jsonl", lines)
    return folder


def _arena_hard(folder: Path) -> dict[str, float]:
    """Arena-Hard-Auto's battles from the files' own scores: games[0] has the baseline as
    model_a, games[1] the judged model; a strong verdict counts 3 times."""
    model_a, model_b, winner = [], [], []
    for path in sorted(folder.glob("*.jsonl")):
        for text in path.read_text("utf-8").splitlines():
            line = json.loads(text)
            for index, game in enumerate(line["games"]):
                model = line["model"]
                first, second = ("base-b", model) if index == 0 else (model, "base-b")
                score = game["score"]
                won = {"A>>B": "model_a", "A>B": "model_a", "A=B": "tie"}.get(score, "model_b")
                repeat = 3 if ">>" in score else 1
                for _ in range(repeat):
                    model_a.append(first)
                    model_b.append(second)
                    winner.append(won)
    return arena_hard_elo(model_a, model_b, winner, "base-b")


def test_a_judgment_folder_is_one_run_ranked_as_arena_hard_auto_ranks_it(tmp_path: Path) -> None:
    folder = _folder(tmp_path, np.random.default_rng(2))
    (seed,) = read_seeds("arena-hard", folder, ImportOptions())
    assert len(seed.pairs.pairs) == QUESTIONS * len(MODELS)
    assert seed.pairs.pairs[0].pair_id == "q0:m-alpha:base-b"
    work = WorkDir.at(tmp_path / "work")
    built = build_import(work, [seed], "ah")
    write_remap(work, remap_run(work, "ah"))
    _, manifest = read_manifest(work, built.manifest_hash)
    outcomes = pd.read_parquet(RunFolder(work, "ah").outcomes)
    (board,) = leaderboard_of(outcomes, manifest, BoardOptions(replicates=50), "per-order")
    assert board["baseline"] == "base-b" and board["questions"] == QUESTIONS
    expected = _arena_hard(folder)
    for row in board["systems"]:
        assert row["score"] == pytest.approx(expected[row["system"]], abs=1e-6)
    assert [r["system"] for r in board["systems"]][0] == "m-alpha"
    sources = pd.read_parquet(RunFolder(work, "ah").table("imported"))
    assert {Path(s).name for s in sources["source_file"]} == {f"{m}.jsonl" for m in MODELS}


def test_a_folder_without_a_named_baseline_needs_one(tmp_path: Path) -> None:
    folder = _folder(tmp_path, np.random.default_rng(3), baseline=None)
    with pytest.raises(InputError, match="give --baseline NAME"):
        read_seeds("arena-hard", folder, ImportOptions())
    (seed,) = read_seeds("arena-hard", folder, ImportOptions(baseline="gpt-4-0314"))
    assert seed.pairs.pairs[0].pair_id == "q0:m-alpha:gpt-4-0314"


def test_the_files_of_a_folder_are_the_folder(tmp_path: Path) -> None:
    """`import arena-hard model_judgment/JUDGE/*.jsonl`: files of different models are one
    leaderboard run, as the folder is, not repeated runs of one system."""
    folder = _folder(tmp_path, np.random.default_rng(4))
    (whole,) = read_seeds("arena-hard", folder, ImportOptions())
    paths = sorted(folder.glob("*.jsonl"), reverse=True)  # the order given does not matter
    files = read_files("arena-hard", paths, ImportOptions())
    check_files(files)
    (seed,) = files
    assert seed.pairs == whole.pairs and seed.judgments == whole.judgments
    assert seed.path == folder and seed.sha256 == whole.sha256


def test_each_models_files_are_its_repeated_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs' folders given file by file: seed s holds each model's s-th file."""
    runs = [_folder(tmp_path / f"run{r}", np.random.default_rng(r)) for r in (5, 6)]
    paths = [p for folder in runs for p in sorted(folder.glob("*.jsonl"))]
    files = read_files("arena-hard", paths, ImportOptions())
    check_files(files)
    assert [f.path for f in files] == runs
    work = WorkDir.at(tmp_path / "work")
    assert build_import(work, files, "ah2").k == 2
    dropped = [str(p) for p in paths if p != runs[1] / "m-beta.jsonl"]
    other = tmp_path / "other"
    refused = run_main(monkeypatch, "--work-dir", str(other), "import", "arena-hard", *dropped)
    refused.assert_one_paragraph(
        f"error: {runs[0]}/m-beta.jsonl: the files judge 5 models, one leaderboard run, but "
        "model 'm-beta' has 1 file",
        "and the others 2",
    )
    assert "--dataset" not in refused.err
    assert not [p for p in other.rglob("*") if p.is_file()]


def _losing_folder(root: Path, rng: np.random.Generator) -> Path:
    """Arena-Hard-Auto v2's layout, 40 questions: `m-weak` wins 2 of its 80 games, loses
    the rest strongly; two other models are ordinary. Answers vary in length and markdown,
    so style control has covariates to fit."""
    folder = root / "arena-hard-v2.0" / "model_judgment" / "judge-x"
    strengths = {"m-good": 0.4, "m-fair": -0.2}
    for model in ("m-weak", *strengths):
        lines = []
        for q in range(40):
            question = f"Question {q}?"
            mine = f"{model} on {q}." + " more" * int(rng.integers(0, 30))
            mine += "\n- a point" * int(rng.integers(0, 3))
            theirs = f"baseline on {q}." + " words" * int(rng.integers(0, 30))
            games = []
            for index, (first, second, sign) in enumerate(((theirs, mine, -1), (mine, theirs, 1))):
                if model == "m-weak":
                    won = (q, index) in {(3, 0), (17, 1)}
                    verdict = ("B>A" if sign < 0 else "A>B") if won else (
                        "A>>B" if sign < 0 else "B>>A")  # fmt: skip
                else:
                    weights = np.exp(sign * strengths[model] * np.array([2, 1, 0, -1, -2]))
                    verdict = str(rng.choice(VERDICTS, p=weights / weights.sum()))
                games.append(game_v2(question, first, second, f"Verdict: [[{verdict}]]", verdict))
            lines.append({"uid": f"q{q}", "category": "hard_prompt", "judge": "judge-x",
                          "model": model, "baseline": "base-b", "games": games})  # fmt: skip
        write(folder / f"{model}.jsonl", lines)
    return folder


def test_a_system_that_loses_nearly_every_game_keeps_a_finite_interval_under_style_control(
    tmp_path: Path,
) -> None:
    folder = _losing_folder(tmp_path, np.random.default_rng(4))
    (seed,) = read_seeds("arena-hard", folder, ImportOptions())
    work = WorkDir.at(tmp_path / "work")
    built = build_import(work, [seed], "weak")
    write_remap(work, remap_run(work, "weak"))
    _, manifest = read_manifest(work, built.manifest_hash)
    outcomes = pd.read_parquet(RunFolder(work, "weak").outcomes)
    widths = {}
    for style in (False, True):
        options = BoardOptions(style_control=style, replicates=1000)
        (board,) = leaderboard_of(outcomes, manifest, options, "per-order")
        weak = next(r for r in board["systems"] if r["system"] == "m-weak")
        assert (weak["wins"], weak["bound"]) == (2, None)  # an estimate, not a bound
        # about e^-2 of the replicates drew neither winning question: counted, not clamped
        assert 50 < weak["unbounded_replicates"] < 250
        assert weak["lower"] is not None and weak["upper"] is not None
        assert weak["lower"] < weak["score"] < weak["upper"] < 1000
        assert weak["bt_win_rate_lower"] > 0.05  # percent: not a clamp's 0.00
        widths[style] = weak["upper"] - weak["lower"]
        if style:
            assert board["style_check"]["identified"]
            assert set(board["style"]) >= {"length", "list_density"}
    assert 1 / 3 < widths[True] / widths[False] < 3  # the same order of magnitude
