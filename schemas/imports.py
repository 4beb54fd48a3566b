"""Judgments made by another tool and imported into a run: where each reply came from."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from schemas.vocabulary import SlotLabel

IMPORTED_PROVIDER_PREFIX = "imported:"
"""An imported reply's `provider` in the cache and in `calls.parquet` is this plus the tool
(`imported:judgebench`): no call was sent for it and nothing was paid."""


class ImportedReplyRecord(BaseModel):
    """Where an imported reply came from (`cache/imported/*.parquet`, one row per call key).

    The reply text itself is a `ReplyRecord` in `cache/replies/` under the same call key, with
    provider `imported:<tool>`, zero latency and no token counts.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    call_key: str
    tool: str = Field(description="The tool that made the judgment: judgebench, arena-hard, ...")
    source_file: str = Field(description="The judgment file, as given to `judgeline import`.")
    source_sha256: str = Field(description="SHA-256 of the whole file's bytes.")
    source_line: int = Field(ge=1, description="1-based line (or row) of the judgment.")
    judgment: int = Field(ge=0, description="Index of the judgment within that line (game).")
    recorded_verdict: str | None = Field(
        default=None, description="The verdict the file records for this reply, as written."
    )
    recorded_label: SlotLabel | None = Field(
        default=None, description="That verdict as a slot label of the display it was made on."
    )
    imported_at: dt.datetime
