"""The report's Jinja2 environment: templates under `templates/`, autoescaped, compact HTML.

Templates are laid out on indented lines for reading; the page itself has no whitespace
between tags. `_Compact` joins a template's lines before Jinja2 parses it: a line break (with
the indentation around it) next to a tag, `{{ }}` or `{% %}` disappears, and one between two
words of prose reads as a space. The stylesheet and script (`*.css.j2`, `*.js.j2`) are kept
exactly as written.

Compiling the templates takes longer than rendering a small run's report, so their compiled
code is kept in the user's cache folder (`_TemplateCache`), private to the user like every
judgeline file that holds runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import Environment, PackageLoader, StrictUndefined
from jinja2.bccache import Bucket, FileSystemBytecodeCache
from jinja2.ext import Extension

from tasks.report import filters
from tasks.report.filters import FILTERS, finalize
from tasks.store.usercache import user_cache_dir

_BREAK = re.compile(r"[ \t]*\n\s*")


def _join(match: re.Match[str]) -> str:
    text, start, end = match.string, match.start(), match.end()
    before = text[start - 1] if start else ">"
    after = text[end] if end < len(text) else "<"
    return "" if before in ">}" or after in "<{" else " "


class _Compact(Extension):
    """Join an HTML template's lines (see the module docstring)."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        if name is None or not name.endswith(".html.j2"):
            return source
        return _BREAK.sub(_join, source)


class _TemplateCache(FileSystemBytecodeCache):
    """Compiled templates in a folder of the user's own (0700, files 0600). An entry is used
    only for the same template source compiled by the same Jinja2 and the same environment
    (this module and the filters); Jinja2 checks the Python version. A folder that cannot be
    made or written, or an entry that cannot be read, means compiling as without a cache."""

    def __init__(self, directory: Path) -> None:
        super().__init__(str(directory), "%s.j2c")
        code = Path(__file__).read_bytes() + Path(filters.__file__ or "").read_bytes()
        self._stamp = jinja2.__version__.encode() + hashlib.sha256(code).digest()

    def get_source_checksum(self, source: str) -> str:
        return hashlib.sha256(self._stamp + source.encode("utf-8")).hexdigest()

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # a damaged entry: compile again (and replace it)
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):  # not kept: the next process compiles again
            super().dump_bytecode(bucket)


def _template_cache() -> _TemplateCache | None:
    """The cache in the user's cache folder, or None where there is no private one."""
    folder = user_cache_dir() / "report-templates"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return None
        if stat.S_IMODE(st.st_mode) != 0o700:
            # Others could write here until now: what they may have left is not loaded.
            folder.chmod(0o700)
            for entry in folder.iterdir():
                entry.unlink()
        return _TemplateCache(folder)
    except OSError:
        return None


@cache
def environment() -> Environment:
    """The one environment every report template renders in (templates compile once, and
    their compiled code is reused from the user's cache by later processes)."""
    env = Environment(
        loader=PackageLoader("tasks.report", "templates"),
        bytecode_cache=_template_cache(),
        autoescape=True,
        finalize=finalize,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        extensions=[_Compact],
    )
    env.filters.update(FILTERS)
    return env


def render_page(**context: Any) -> str:
    """The report page (`report.html.j2`) for a prepared context."""
    return environment().get_template("report.html.j2").render(**context)
