"""Reproducible installs: `./run` installs the versions of `requirements.lock` (the ones the
tests ran against) inside `pyproject.toml`'s ranges, which `pip install` of the package keeps.
"""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, Version]:
    pins = {}
    for line in (REPO / "requirements.lock").read_text("utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"requirements.lock: {line!r} is not `name==version`"
        pins[canonicalize_name(name)] = Version(version)
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]
    return [
        Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    ]


def test_the_lock_pins_every_dependency_inside_its_range() -> None:
    pins = _pins()
    for req in _requirements():
        pinned = pins.get(canonicalize_name(req.name))
        assert pinned is not None, f"requirements.lock has no pin for {req.name}"
        assert req.specifier.contains(pinned, prereleases=True), (
            f"requirements.lock pins {req.name}=={pinned}, outside pyproject.toml's {req}"
        )
    assert str(pins[canonicalize_name("prefect")]).startswith("3.")
    assert "judgeline" not in pins  # the project itself is installed from the clone


def test_run_installs_the_lock_and_reinstalls_when_it_changes() -> None:
    script = (REPO / "run").read_text("utf-8")
    assert 'pip install --quiet -c "$lock" -e ".[dev]"' in script
    assert "cat pyproject.toml requirements.lock | sha256sum" in script  # the stamp
    assert "\nlock)\n" in script and "pip freeze --exclude-editable" in script


@pytest.mark.skipif(
    not (Path(sys.prefix) / ".judgeline-installed").is_file(),
    reason="a virtual environment `./run` did not make may hold other versions",
)
def test_the_tests_run_against_the_locked_versions() -> None:
    pins = _pins()
    for req in _requirements():
        installed = Version(metadata.version(req.name))
        assert installed == pins[canonicalize_name(req.name)], (
            f"{req.name} {installed} is installed, requirements.lock says "
            f"{pins[canonicalize_name(req.name)]}: `./run lock` or `./run test` again"
        )
