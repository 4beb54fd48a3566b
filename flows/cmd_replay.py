"""Subcommands replay: stopping policies over cached outcomes."""

from __future__ import annotations

from flows.cli import app  # noqa: F401
