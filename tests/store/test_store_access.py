"""Opening a work dir on an object store: URLs the store client would not keep exactly are
refused, a configuration that cannot reach the store says what to set before any request
(none goes to a cloud's metadata service unless asked for), and the store's refusals (a
missing bucket, keys it does not know) say what to do."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks.errors import InputError, StoreError
from tasks.store.access import INSTANCE_ENV
from tasks.store.workdir import WorkDir
from tests.store.conftest import start_moto

REPO = Path(__file__).resolve().parents[2]
JUDGELINE = str(REPO / ".venv" / "bin" / "judgeline")


@pytest.fixture
def no_store_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a store client fails the test: the checks must come before any request."""
    import obstore.store

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the store client was built (requests would follow)")

    monkeypatch.setattr(obstore.store, "from_url", refuse)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("s3://b/team#1", "'#"),
        ("s3://b/team?x=1", "'?"),
        ("s3://b/a%2Fb", "%2F becomes /"),
        ("s3://b/dot/../up", "'..' part"),
        ("s3://b/dot/./up", "'.' part"),
        ("s3://b/a//b", "empty part"),
    ],
)
def test_a_url_the_store_client_would_change_is_refused_in_one_line(
    url: str, said: str, tmp_path: Path, no_store_client: None
) -> None:
    with pytest.raises(InputError) as caught:
        WorkDir.at(url, scratch=tmp_path / "scratch")
    message = str(caught.value)
    assert url in message and said in message and "\n" not in message
    assert not (tmp_path / "scratch").exists()  # nothing opened, no copy made


def test_a_plain_url_still_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    work = WorkDir.at("s3://b/team-1/x.y_z", scratch=tmp_path / "scratch")
    assert work.address == "s3://b/team-1/x.y_z"


def _bare_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("AWS_", "GOOGLE_", "AZURE_")) or name == INSTANCE_ENV:
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", "/nonexistent-home")


def test_no_credentials_is_said_before_any_request_and_names_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_store_client: None
) -> None:
    _bare_env(monkeypatch)
    for url, needed in (
        ("s3://b/team", "AWS_ACCESS_KEY_ID"),
        ("gs://b/team", "GOOGLE_APPLICATION_CREDENTIALS"),
        ("az://c/team", "AZURE_STORAGE_ACCOUNT_KEY"),
    ):
        with pytest.raises(StoreError) as caught:
            WorkDir.at(url, scratch=tmp_path / "scratch")
        message = str(caught.value)
        assert "no credentials" in message and needed in message, message
        assert f"{INSTANCE_ENV}=true" in message


def test_instance_credentials_are_used_only_when_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import obstore.store

    built: list[str] = []

    def record(url: str, **kwargs: object) -> object:
        built.append(url)  # no real client: no request can go anywhere
        return object()

    monkeypatch.setattr(obstore.store, "from_url", record)
    _bare_env(monkeypatch)
    monkeypatch.setenv(INSTANCE_ENV, "true")
    work = WorkDir.at("s3://b/asked", scratch=tmp_path / "scratch")
    assert work.url == "s3://b/asked" and built and set(built) == {"s3://b/asked"}


def test_an_http_endpoint_without_allow_http_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_store_client: None
) -> None:
    _bare_env(monkeypatch)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    with pytest.raises(StoreError) as caught:
        WorkDir.at("s3://b/team", scratch=tmp_path / "scratch")
    assert "AWS_ALLOW_HTTP=true" in str(caught.value)
    assert "builder error" not in str(caught.value)


def test_the_cli_refuses_a_url_with_a_fragment_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "JUDGELINE_SCRATCH_DIR": str(tmp_path / "scratch")}
    done = subprocess.run([JUDGELINE, "--work-dir", "s3://b/team#1", "runs"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "s3://b/team#1" in done.stderr and "fragment" in done.stderr


@pytest.fixture(scope="module")
def strict_s3() -> Iterator[str]:
    """A second moto server on loopback that checks keys (it knows none of ours)."""
    proc, endpoint = start_moto({**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"})
    try:
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_a_missing_bucket_and_unknown_keys_say_what_to_do(
    s3_server: object, strict_s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = WorkDir.at("s3://no-such-bucket-here/x", scratch=tmp_path / "one")
    with pytest.raises(StoreError) as caught:
        missing.store.check_access()  # type: ignore[attr-defined]
    assert "bucket does not exist" in str(caught.value)
    assert "create it" in str(caught.value)

    monkeypatch.setenv("AWS_ENDPOINT_URL", strict_s3)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "not-a-known-key")
    refused = WorkDir.at("s3://some-bucket/x", scratch=tmp_path / "two")
    with pytest.raises(StoreError) as caught:
        refused.store.check_access()  # type: ignore[attr-defined]
    message = str(caught.value)
    assert "does not accept the credentials" in message and "AWS_SECRET_ACCESS_KEY" in message


def test_a_store_that_never_answered_is_not_waited_for_as_for_an_outage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrong address (nothing listens there) fails after the short first patience and
    says to check it, though the patience for an outage is minutes."""
    import tasks.store.objects as objects

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: connections are refused
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv(objects.PATIENCE_ENV, "300")
    monkeypatch.setattr(objects, "FIRST_PATIENCE_S", 1.0)
    work = WorkDir.at("s3://b/nowhere", scratch=tmp_path / "scratch")
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        work.store.list_objects("runs/")  # type: ignore[attr-defined]
    assert time.monotonic() - started < 30
    assert "did not answer" in str(caught.value) and "AWS_ENDPOINT_URL" in str(caught.value)
