"""Imports: judgment files made by other tools -> a judgeline run, with nothing sent.

One module per format reads a file into pairs and judgments placed by display order
(`judgebench`, `arenahard`, `fastchat`); `records` holds what they hand over, `build` turns
the files of one judge (one per seed) into a manifest, a plan, cached replies marked as
imported and the run's calls, and `agreement` compares judgeline's labels with the verdicts
the files record. Remap, replay and report then run as for any run.
"""

from pathlib import Path

from tasks.errors import InputError
from tasks.imports.agreement import agreement
from tasks.imports.build import IMPORT_KEY_FORMAT, ImportedRun, build_import, imported_table
from tasks.imports.judgebench import read_judgebench_output
from tasks.imports.records import ImportedFile, Judgment

__all__ = [
    "FORMATS",
    "IMPORT_KEY_FORMAT",
    "ImportedFile",
    "ImportedRun",
    "Judgment",
    "agreement",
    "build_import",
    "imported_table",
    "read_imported",
    "read_judgebench_output",
]

FORMATS = ("judgebench",)
"""The formats `read_imported` reads."""


def read_imported(fmt: str, path: str | Path, *, dataset: str | None = None) -> ImportedFile:
    """Read one judgment file of format `fmt` (one of FORMATS)."""
    if fmt == "judgebench":
        return read_judgebench_output(path, dataset=dataset)
    raise InputError(f"unknown import format {fmt!r}; expected one of {', '.join(FORMATS)}")
