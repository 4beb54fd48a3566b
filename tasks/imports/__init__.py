"""Imports: judgment files made by other tools -> a judgeline run, with nothing sent.

One module per format reads a file into pairs and judgments placed by display order
(`judgebench`, `arenahard`, `fastchat`, and `table` for a generic judgments table);
`records` holds what they hand over, `build` turns the files of one judge (one per seed)
into a manifest, a plan, cached replies marked as imported and the run's calls, and
`agreement` compares judgeline's labels with the verdicts the files record, and `summary`
counts what the import prints per judge config. Remap, replay and report then run as for any
run.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.errors import InputError
from tasks.imports.agreement import agreement
from tasks.imports.arenahard import leaderboard_seeds, read_arenahard, read_arenahard_dir
from tasks.imports.build import (
    IMPORT_KEY_FORMAT,
    ImportedRun,
    build_import,
    check_files,
    imported_table,
)
from tasks.imports.fastchat import read_fastchat
from tasks.imports.judgebench import read_judgebench_output
from tasks.imports.records import ImportedFile, Judgment
from tasks.imports.summary import import_summary, summary_lines
from tasks.imports.table import read_judgment_table

__all__ = [
    "FORMATS",
    "IMPORT_KEY_FORMAT",
    "ImportOptions",
    "ImportedFile",
    "ImportedRun",
    "Judgment",
    "agreement",
    "build_import",
    "check_files",
    "import_config",
    "import_summary",
    "imported_table",
    "read_files",
    "read_imported",
    "read_judgebench_output",
    "read_seeds",
    "summary_lines",
]

FORMATS = ("judgebench", "arena-hard", "fastchat", "table")
"""The formats judgeline imports."""


@dataclass(frozen=True)
class ImportOptions:
    """What some formats need besides the file: FastChat's question and answer files, a
    table's column mapping, judge and template."""

    dataset: str | None = None
    questions: str | None = None
    answers_dir: str | None = None
    mapping: str | None = None
    judge: str | None = None
    template: str = "arena-hard-v1"
    baseline: str | None = None


def import_config(
    fmt: str, paths: list[str] | list[Path], files: list[ImportedFile]
) -> dict[str, Any]:
    """An imported run's configuration for its record: the format, the files given, K (one
    seed per file read), the template and the one judge with its one config."""
    first = files[0]
    return {
        "import": fmt, "files": [str(p) for p in paths], "k": len(files),
        "template": first.template_id, "judges": [{"name": first.judge, "configs": [first.config]}],
    }  # fmt: skip


def read_imported(fmt: str, path: str | Path, *, dataset: str | None = None) -> ImportedFile:
    """Read one judgment file of a one-seed-per-file format (judgebench, arena-hard)."""
    if fmt == "judgebench":
        return read_judgebench_output(path, dataset=dataset)
    if fmt == "arena-hard":
        return read_arenahard(path, dataset=dataset)
    raise InputError(f"unknown import format {fmt!r}; expected one of {', '.join(FORMATS)}")


_read: dict[tuple[object, ...], list[ImportedFile]] = {}
"""Files this process read, by format, path, size, mtime and options: the `import` command
reads them before Prefect starts (to refuse a bad one at once), its flow reads them again."""


def read_files(fmt: str, paths: Sequence[str | Path], options: ImportOptions) -> list[ImportedFile]:
    """The seeds of the files given, in order (`read_seeds` of each); Arena-Hard files of
    several judged models make one leaderboard run (`leaderboard_seeds`)."""
    seeds = [f for p in paths for f in read_seeds(fmt, p, options)]
    if fmt == "arena-hard":
        return leaderboard_seeds(seeds, dataset=options.dataset, baseline=options.baseline)
    return seeds


def read_seeds(fmt: str, path: str | Path, options: ImportOptions) -> list[ImportedFile]:
    """The seeds one file holds, in order: one for a judgment file, one per seed value of a
    judgments table. A file read before in this process, unchanged, is not read again."""
    try:
        stat = Path(path).stat()
        key: tuple[object, ...] | None = (
            fmt,
            str(Path(path).resolve()),
            stat.st_size,
            stat.st_mtime_ns,
            options,
        )
    except OSError:
        key = None  # the reader names the problem
    if key is not None and key in _read:
        return _read[key]
    seeds = _read_seeds(fmt, path, options)
    if key is not None:
        _read[key] = seeds
    return seeds


def _read_seeds(fmt: str, path: str | Path, options: ImportOptions) -> list[ImportedFile]:
    if fmt == "fastchat":
        return [
            read_fastchat(
                path, questions=options.questions, answers_dir=options.answers_dir,
                dataset=options.dataset,
            )
        ]  # fmt: skip
    if fmt == "table":
        if options.mapping is None:
            raise InputError(
                "a judgments table needs --map naming its columns (pair_id, question, "
                "answer_a, answer_b, reply, left or order; optional seed, verdict, judge)",
                file=str(path),
            )
        return read_judgment_table(
            path, options.mapping, judge=options.judge, template=options.template,
            dataset=options.dataset,
        )  # fmt: skip
    if fmt == "arena-hard" and Path(path).is_dir():
        return [read_arenahard_dir(path, dataset=options.dataset, baseline=options.baseline)]
    return [read_imported(fmt, path, dataset=options.dataset)]
