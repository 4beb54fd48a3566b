"""Prefect's telemetry notice ("Prefect collects anonymous usage data ...") printed in every
fresh work dir's terminal: judgeline turns Prefect's client telemetry off, as it turns its
server analytics off, unless the user chose otherwise."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

NOTICE = "Prefect collects anonymous usage data"
CI_VARIABLES = ("CI", "GITHUB_ACTIONS", "GITLAB_CI", "JENKINS_URL", "BUILDKITE", "CI_NAME")


def in_a_terminal(code: str, home: Path, **env: str) -> str:
    """Run `code` with stdout and stderr on a pseudo-terminal; what it printed."""
    clean = {k: v for k, v in os.environ.items() if k not in ("DO_NOT_TRACK", *CI_VARIABLES)}
    clean |= {"PREFECT_HOME": str(home), **env}
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=follower, stderr=follower, stdin=subprocess.DEVNULL, env=clean, cwd=REPO,
        )  # fmt: skip
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process ended
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=120) == 0, out
    finally:
        os.close(leader)
    return out.decode("utf-8", "replace")


SETUP = "from flows.runtime import configure_prefect; configure_prefect(); import prefect"


@pytest.mark.slow  # three fresh Prefect imports
def test_no_telemetry_notice_in_a_terminal(tmp_path: Path) -> None:
    # The check itself works: bare Prefect prints the notice in a fresh home.
    assert NOTICE in in_a_terminal("import prefect", tmp_path / "bare")
    assert NOTICE not in in_a_terminal(SETUP, tmp_path / "judgeline")
    # A user who asks for Prefect's telemetry keeps it.
    assert NOTICE in in_a_terminal(SETUP, tmp_path / "chosen", DO_NOT_TRACK="0")
