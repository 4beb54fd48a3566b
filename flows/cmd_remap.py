"""Subcommands remap: slot labels to identity outcomes and dispositions."""

from __future__ import annotations

from flows.cli import app  # noqa: F401
