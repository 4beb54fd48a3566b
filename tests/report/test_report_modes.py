"""Reports hold questions, answers and replies: like every file of a run they are readable by
their user only, whatever the umask, unless sharing them is asked for
(`JUDGELINE_SHARE_REPORTS=1`), and then the umask decides."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tasks.history import page as trends_page
from tasks.report import disagreements, render


def _report(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(render, "render_report", lambda data: "<html>report</html>")
    return render.write_report(Any, folder / "report.html")  # type: ignore[arg-type]


def _pairs_page(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    class Section:
        page = True

    monkeypatch.setattr(disagreements, "disagreements_section", lambda views: Section())
    monkeypatch.setattr(disagreements, "render_pairs_page", lambda views, title: "<html/>")
    path = disagreements.write_pairs_page([], folder, "r1")
    assert path is not None
    return path


def _trends(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from tasks.store.workdir import WorkDir

    monkeypatch.setattr(trends_page, "render_trends", lambda points, systems: "<html/>")
    return trends_page.write_trends(WorkDir(folder), [])


WRITERS: dict[str, Callable[[Path, pytest.MonkeyPatch], Path]] = {
    "report.html": _report,
    "disagreements.html": _pairs_page,
    "trends.html": _trends,
}


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("name", WRITERS)
@pytest.mark.parametrize(
    ("mask", "share", "mode"),
    [
        (0o077, None, 0o600),
        (0o022, None, 0o600),
        (0o022, "1", 0o644),
        (0o027, "1", 0o640),
        (0o077, "1", 0o600),
    ],  # fmt: skip
)
def test_a_report_is_private_unless_shared_and_never_past_the_umask(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    umask: Callable[[int], None],
    name: str,
    mask: int,
    share: str | None,
    mode: int,
) -> None:
    if share is None:
        monkeypatch.delenv("JUDGELINE_SHARE_REPORTS", raising=False)
    else:
        monkeypatch.setenv("JUDGELINE_SHARE_REPORTS", share)
    umask(mask)
    for _ in range(2):  # written, then replaced
        path = WRITERS[name](tmp_path, monkeypatch)
        assert path.name == name
        assert stat.S_IMODE(path.stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
