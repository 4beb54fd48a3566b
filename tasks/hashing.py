"""Canonical serialisation and SHA-256 helpers shared by every content hash in judgeline."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of a string's UTF-8 bytes, exactly as they are."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_bytes(data: bytes) -> str:
    """SHA-256 (hex) of raw bytes."""
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no whitespace and non-ASCII kept: one text per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(*parts: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of `parts`: for ids derived from several fields."""
    return sha256_text(canonical_json(list(parts)))
