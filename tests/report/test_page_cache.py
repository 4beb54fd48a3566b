"""The report templates' compiled code, kept in the user's cache folder between processes."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jinja2 import Environment

from tasks.report import page


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    page.environment.cache_clear()
    yield tmp_path / "cache" / "judgeline" / "report-templates"
    page.environment.cache_clear()


def _load() -> object:
    """Load (compile, or take from the cache) one template in the current environment."""
    return page.environment().get_template("section.html.j2")


def test_compiled_templates_are_private_and_reused(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _load()
    assert stat.S_IMODE(cache_home.stat().st_mode) == 0o700
    entries = list(cache_home.iterdir())
    assert entries and all(stat.S_IMODE(e.stat().st_mode) == 0o600 for e in entries)

    # A new process (a new environment) loads them instead of compiling.
    page.environment.cache_clear()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled although the cache holds the template")

    monkeypatch.setattr(Environment, "compile", refuse)
    _load()


def test_an_entry_of_other_environment_code_or_a_damaged_one_is_not_used(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _load()
    compiled = _count_compiles(monkeypatch)
    # Other environment code (page.py or the filters edited): another stamp.
    monkeypatch.setattr(page._TemplateCache, "__init__", _other_stamp)
    page.environment.cache_clear()
    _load()
    assert compiled == ["section.html.j2"]
    monkeypatch.undo()

    for entry in cache_home.iterdir():
        entry.write_bytes(entry.read_bytes()[:20])  # cut short
    page.environment.cache_clear()
    assert _load() is not None


def _count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the templates compiled from now on (a cache hit compiles none)."""
    compiled: list[str] = []
    original = Environment.compile

    def counting(self: Environment, source: str, name: str | None = None, *a: Any) -> Any:
        compiled.append(name or "")
        return original(self, source, name, *a)

    monkeypatch.setattr(Environment, "compile", counting)
    return compiled


def _other_stamp(self: page._TemplateCache, directory: Path) -> None:
    super(page._TemplateCache, self).__init__(str(directory), "%s.j2c")
    self._stamp = b"other environment code"


def test_no_usable_cache_folder_means_compiling_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # a file: no folder can be made in it
    page.environment.cache_clear()
    try:
        assert page.environment().bytecode_cache is None
        assert _load() is not None
    finally:
        page.environment.cache_clear()


def test_entries_written_while_the_folder_was_open_to_others_are_not_loaded(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiled templates are code: a folder others could write to is made private again,
    and whatever it held is compiled afresh, never loaded."""
    _load()
    cache_home.chmod(0o777)
    page.environment.cache_clear()
    compiled = _count_compiles(monkeypatch)
    _load()
    assert stat.S_IMODE(cache_home.stat().st_mode) == 0o700
    assert compiled  # not taken from the open folder
