"""Subcommands freeze and plan: the manifest and presentation-map jobs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from flows.cli.app import app, console, state
from tasks.errors import InputError


def _say(text: str) -> None:
    """One output line, never wrapped (hashes and paths must stay copyable). Values from
    input files (ids, names, paths) must be passed through `escape`: a `[/x]` in them is
    text, not rich markup."""
    console.print(text, highlight=False, soft_wrap=True)


def _answers_sources(
    answers: list[Path], baseline: str | None, pairs: str | None
) -> list[dict[str, Any]]:
    """The source dicts of `--answers` tables; `--baseline` and `--pairs` belong to them."""
    if not answers:
        if baseline is not None or pairs is not None:
            raise InputError("--baseline and --pairs apply to --answers tables, and none was given")
        return []
    if not baseline:
        raise InputError(
            "--answers needs --baseline NAME: the system every other system is paired with "
            "(with --pairs round-robin, the one whose score is fixed)"
        )
    return [
        {"kind": "answers", "path": str(p), "baseline": baseline, "pairs": pairs or "baseline"}
        for p in answers
    ]


def _sources(
    judgebench: list[Path],
    rmbench: list[Path],
    tables: list[Path],
    maps: list[str],
    demo: bool,
    answers: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The freeze flow's source dicts; `--map` pairs with `--table` by position, and a single
    `--map` serves every table."""
    if maps and not tables:
        raise InputError("--map applies to --table files, and no --table was given")
    if tables and len(maps) not in (1, len(tables)):
        raise InputError(
            f"give one --map per --table (or one for all): {len(tables)} tables, {len(maps)} maps"
        )
    sources: list[dict[str, Any]] = []
    sources += [{"kind": "judgebench", "path": str(p)} for p in judgebench]
    sources += [{"kind": "rmbench", "path": str(p)} for p in rmbench]
    for i, path in enumerate(tables):
        spec = maps[i] if len(maps) == len(tables) else maps[0] if maps else None
        sources.append({"kind": "table", "path": str(path), "mapping": spec})
    if demo:
        sources.append({"kind": "demo"})
    sources += answers
    if not sources:
        raise InputError(
            "nothing to freeze: give --judgebench, --rmbench, --table, --answers or --demo"
        )
    return sources


@app.command("freeze")
def freeze(
    judgebench: Annotated[
        list[Path] | None, typer.Option("--judgebench", help="JudgeBench .jsonl (repeatable).")
    ] = None,
    rmbench: Annotated[
        list[Path] | None, typer.Option("--rmbench", help="RM-Bench .json (repeatable).")
    ] = None,
    table: Annotated[
        list[Path] | None,
        typer.Option("--table", help="A .jsonl/.csv/.tsv/.parquet table (repeatable)."),
    ] = None,
    map_: Annotated[
        list[str] | None,
        typer.Option(
            "--map",
            help="Column mapping of a --table (one per --table, in order): field=column, "
            "comma-separated. Required: question=, answer_a=, answer_b=. Optional: pair_id= "
            "(default "
            "FILE-ROW), key= (A, B or empty; map other values with "
            "'key=label{A>B:A,B>A:B,tie:none}'), reference= (a reference answer), source= "
            "(default the file name), metadata= (repeatable or ';'-separated, kept as JSON).",
        ),
    ] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Add the generated demo pairs.")] = False,
    answers: Annotated[
        list[Path] | None,
        typer.Option(
            "--answers",
            help="A table of answers, one row per (question, system): columns question_id, "
            "question, system (or model), answer, optional reference (repeatable).",
        ),
    ] = None,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="--answers: the baseline system's name.")
    ] = None,
    pairs: Annotated[
        str | None,
        typer.Option(
            "--pairs",
            help="--answers: 'baseline' (each system against the baseline, the default) or "
            "'round-robin' (every two systems).",
        ),
    ] = None,
) -> None:
    """Freeze pairs from benchmark files into a manifest (exact bytes, hashed, stored once)."""
    if pairs is not None and pairs not in ("baseline", "round-robin"):
        raise InputError(f"--pairs must be 'baseline' or 'round-robin', got {pairs!r}")
    sources = _sources(
        judgebench or [], rmbench or [], table or [], map_ or [], demo,
        _answers_sources(answers or [], baseline, pairs),
    )  # fmt: skip
    # The job runs here, without a flow run: no Prefect server to start for a few files.
    from tasks.ingest.manifest import MANIFEST_FILE
    from tasks.ingest.sources import freeze_sources
    from tasks.storage import read_parquet

    work = state.work
    frozen = freeze_sources(sources, work)
    info = frozen.info
    manifest_hash = info.manifest_hash
    # Two columns of the stored (and gated) manifest, counted by Arrow: a manifest of a
    # million pairs is not read whole again.
    rows = read_parquet(work.manifest_dir(manifest_hash) / MANIFEST_FILE, ["dataset", "key"])
    counted = rows.group_by(["dataset", "key"]).aggregate([([], "count_all")]).to_pylist()

    status = "already frozen" if frozen.already_frozen else "frozen"
    _say(f"manifest [bold]{manifest_hash}[/bold] ({status})")
    _say(f"  {info.pairs} pairs from {escape(', '.join(info.sources))}")
    cells = Counter({(r["dataset"], r["key"] or "none"): r["count_all"] for r in counted})
    for dataset in sorted(info.datasets):
        keys = ", ".join(f"key {k}: {n}" for (d, k), n in sorted(cells.items()) if d == dataset)
        _say(f"  {escape(dataset)}: {info.datasets[dataset]} pairs ({escape(keys)})")
    for pair_id in info.identical_answer_pairs:
        _say(
            f"  [yellow]warning[/yellow]: pair {escape(repr(pair_id))} has byte-identical "
            "answers A and B (kept)",
        )
    _say(f"  written to {escape(work.location(work.manifest_dir(manifest_hash)))}")


@app.command("plan")
def plan(
    manifest_hash: Annotated[str, typer.Argument(help="Manifest hash or a unique prefix of it.")],
    k: Annotated[int, typer.Option("--k", help="Seeds per pair (even, >= 2).")] = 4,
    design: Annotated[
        str, typer.Option("--design", help="full | common | independent | balanced")
    ] = "full",
    rng_seed: Annotated[
        int | None, typer.Option("--rng-seed", help="Seed of a design's draw (default: random).")
    ] = None,
) -> None:
    """Plan display orders for a manifest: the full 2K grid or one drawn design."""
    from schemas.vocabulary import PLAN_DESIGNS
    from tasks.ingest.manifest import resolve_manifest_hash
    from tasks.plan import check_design, check_k, check_plan_request, draw_rng_seed, plan_orders

    work = state.work
    full_hash = resolve_manifest_hash(work, manifest_hash)
    check_k(k)
    check_design(design, PLAN_DESIGNS)
    if design == "full" or rng_seed is not None:
        check_plan_request(k, design, rng_seed)
    # The job runs here, without a flow run: no Prefect server to start.
    info = plan_orders(work, full_hash, k, design, draw_rng_seed(design, rng_seed))
    plan_id = info.plan_id
    _say(f"plan [bold]{plan_id}[/bold]")
    seed = "" if info.rng_seed is None else f", rng seed {info.rng_seed}"
    _say(f"  manifest {info.manifest_hash}, design {info.design}, K={info.k}{seed}")
    _say(f"  {info.presentations} presentations for {info.pairs} pairs")
    _say(f"  written to {escape(work.location(work.plan_dir(plan_id)))}")
