"""Subcommands judge and rerun-failed: the judge-call jobs."""

from __future__ import annotations

from flows.cli import app  # noqa: F401
