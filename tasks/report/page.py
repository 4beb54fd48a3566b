"""The report's Jinja2 environment: templates under `templates/`, autoescaped, compact HTML.

Templates are laid out on indented lines for reading; the page itself has no whitespace
between tags. `_Compact` joins a template's lines before Jinja2 parses it: a line break (with
the indentation around it) next to a tag, `{{ }}` or `{% %}` disappears, and one between two
words of prose reads as a space. The stylesheet and script (`*.css.j2`, `*.js.j2`) are kept
exactly as written.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from jinja2.ext import Extension

from tasks.report.filters import FILTERS, finalize

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


@cache
def environment() -> Environment:
    """The one environment every report template renders in (templates compile once)."""
    env = Environment(
        loader=PackageLoader("tasks.report", "templates"),
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
