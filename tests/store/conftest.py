"""A real S3-compatible server for the object-store tests: moto's standalone server, started
on loopback on a free port once per session and stopped with it. Clients talk HTTP to it as
they would to S3 (no mocks); each test gets a bucket of its own."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tasks.store.workdir import WorkDir


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def env(self) -> dict[str, str]:
        """What a process needs to reach the server (credentials from the environment)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }

    def new_bucket(self) -> str:
        name = f"jl-{uuid.uuid4().hex[:12]}"
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        return name


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_moto(env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """moto's standalone server on a free loopback port, once it answers: its process and
    endpoint (`env`: the server's environment, else this process's)."""
    port = _free_port()
    server = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2):
                return proc, endpoint
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"moto_server did not start on {endpoint}")
            time.sleep(0.1)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    proc, endpoint = start_moto()
    found = S3Server(endpoint)
    saved = {k: os.environ.get(k) for k in found.env()}
    os.environ.update(found.env())
    try:
        yield found
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def bucket_url(s3_server: S3Server) -> str:
    """A fresh bucket's URL with a prefix: an empty object-store work dir."""
    return f"s3://{s3_server.new_bucket()}/judgeline"


@pytest.fixture
def store_work(bucket_url: str, tmp_path: Path) -> WorkDir:
    """An empty work dir on the S3 server, its local copy in this test's scratch dir."""
    return WorkDir.at(bucket_url, scratch=tmp_path / "scratch")
