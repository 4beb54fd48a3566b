"""Prefect's UI on the local server, in a real headless Chromium: it asks for the auth string,
refuses a wrong one, and once logged in shows a run's flow run, its task runs and artifacts;
the browser sends the auth string to the server's own address only (never to Prefect's
default port, where another user may listen)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from server_support import env_for, finish, import_command, server_info

from flows.localserver import ServerFiles, stop_server

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def test_the_ui_logs_in_with_the_auth_string_and_shows_a_runs_task_runs_and_artifacts(
    tmp_path: Path,
) -> None:
    if not Path(CHROMIUM).is_file():
        pytest.skip("chromium is missing: run .ci/install-chromium")
    from playwright.sync_api import sync_playwright

    home = tmp_path / "home"
    try:
        proc = subprocess.Popen(import_command(tmp_path), env=env_for(home), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        run_id = re.search(r"runs/([^/]+)/report\.html", finish(proc))
        assert run_id is not None
        info, auth = server_info(home), ServerFiles(home).auth_string()
        assert auth is not None
        sent: list[tuple[str, str | None]] = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1366, "height": 900})
            page.on("request", lambda r: sent.append((r.url, r.headers.get("authorization"))))
            page.goto(info.url)
            password = page.locator("input[type=password]")
            password.wait_for(timeout=60_000)
            password.fill("judgeline:not-the-secret")
            password.press("Enter")
            page.get_by_text("Invalid credentials").wait_for(timeout=30_000)
            password.fill(auth)
            password.press("Enter")
            page.wait_for_url("**/dashboard**", timeout=60_000)

            page.goto(f"{info.url}/v2/runs")
            page.get_by_text(f"work-dir:{tmp_path / 'work'}").first.wait_for(timeout=60_000)
            href = page.locator("a[href*='/runs/flow-run/']").first.get_attribute("href")
            assert href is not None
            page.goto(info.url + href)
            page.get_by_text("import-judgments").first.wait_for(timeout=60_000)
            page.get_by_role("tab", name="Task Runs").click()
            page.get_by_text(re.compile(r"^write-report-")).first.wait_for(timeout=60_000)
            page.get_by_role("tab", name="Artifacts").click()
            artifact = f"judgeline-{run_id.group(1).lower()}-summary"
            page.get_by_text(artifact).first.wait_for(timeout=60_000)
            browser.close()
    finally:
        stop_server(home)
    with_auth = {urlsplit(url).netloc for url, header in sent if header}
    assert with_auth == {f"127.0.0.1:{info.port}"}, with_auth
    assert not any(urlsplit(url).port == 4200 for url, _ in sent)
