"""The judge stage's progress bar: every number whole in an 80-column terminal, and calls
another run stored while this one waited counted as cached."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from tasks.judging.tally import Tally


@pytest.mark.parametrize("width", [80, 120])
def test_the_bar_keeps_every_number_whole(width: int) -> None:
    shown = Console(file=io.StringIO(), width=width, color_system=None)
    tally = Tally(100_000, 90_000, True, console=shown)
    try:
        for _ in range(123):
            tally.record(False, "auth")
        for _ in range(911):  # another run sharing the cache stored these meanwhile
            tally.skip()
        for _ in range(300):
            tally.record(True, None)
        assert tally._progress is not None  # noqa: SLF001
        renderable = tally._progress.get_renderable()  # noqa: SLF001
    finally:
        tally.close()
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    line = out.getvalue().rstrip("\n")
    assert "\n" not in line and "…" not in line, line
    assert "91334/100000" in line, line
    assert "cached 90911" in line and "failed 123" in line, line
    assert re.search(r"ETA (\d+:\d\d:\d\d|-:--:--)$", line), line
    assert re.search(r"[\d,]+/s", line), line
    assert (tally.cached, tally.skipped, tally.sent) == (90_000, 911, 423)
