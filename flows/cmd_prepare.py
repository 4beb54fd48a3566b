"""Subcommands freeze and plan: the manifest and presentation-map jobs."""

from __future__ import annotations

from flows.cli import app  # noqa: F401
