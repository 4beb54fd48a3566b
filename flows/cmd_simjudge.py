"""Subcommands serve-judge: the simulated judge on loopback."""

from __future__ import annotations

from flows.cli import app  # noqa: F401
