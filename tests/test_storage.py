"""Write-once folders: staged, checked, renamed into place in one step, never overwritten."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from tasks.errors import IntegrityError
from tasks.storage import publish_folder_once, published_folders


class _Info(BaseModel):
    name: str


TABLE = pa.table({"x": [1, 2, 3]})


def _publish(
    final: Path, checked: list[Path], also: Callable[[Path], None] | None = None
) -> str | None:
    def check(staged: Path) -> None:
        checked.append(staged)
        assert pq.read_table(staged / "t.parquet").equals(TABLE)
        assert _Info.model_validate_json((staged / "info.json").read_text()).name == "f"
        if also is not None:
            also(staged)

    return publish_folder_once(
        final,
        table=TABLE,
        table_file="t.parquet",
        info=_Info(name="f"),
        info_file="info.json",
        check=check,
        verify_existing=lambda: "verified",
    )


def test_a_new_folder_is_checked_in_staging_then_published_whole(tmp_path: Path) -> None:
    final = tmp_path / "f"
    checked: list[Path] = []
    assert _publish(final, checked) is None
    assert len(checked) == 1 and checked[0].parent == tmp_path and checked[0] != final
    assert sorted(p.name for p in final.iterdir()) == ["info.json", "t.parquet"]
    assert pq.read_table(final / "t.parquet").equals(TABLE)
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_an_existing_folder_is_verified_and_not_written(tmp_path: Path) -> None:
    final = tmp_path / "f"
    final.mkdir()
    checked: list[Path] = []
    assert _publish(final, checked) == "verified"
    assert checked == [] and list(final.iterdir()) == []


def test_a_failed_check_publishes_nothing_and_leaves_no_staging(tmp_path: Path) -> None:
    def fail(staged: Path) -> None:
        raise IntegrityError("bad bytes")

    with pytest.raises(IntegrityError, match="bad bytes"):
        _publish(tmp_path / "f", [], fail)
    assert list(tmp_path.iterdir()) == []


def test_a_writer_that_publishes_first_wins_and_is_verified(tmp_path: Path) -> None:
    final = tmp_path / "f"

    def other_writer(staged: Path) -> None:
        final.mkdir()
        (final / "t.parquet").write_bytes(b"theirs")

    assert _publish(final, [], other_writer) == "verified"
    assert (final / "t.parquet").read_bytes() == b"theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_an_incomplete_folder_in_the_way_is_an_error(tmp_path: Path) -> None:
    final = tmp_path / "f"

    def other_writer(staged: Path) -> None:
        final.mkdir()
        (final / "stray").write_bytes(b"")

    with pytest.raises(OSError):
        _publish(final, [], other_writer)
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_published_folders_are_listed_by_name_without_staging_ones(tmp_path: Path) -> None:
    assert published_folders(tmp_path / "absent", "info.json") == []
    checked: list[Path] = []
    for name in ("b", "a"):
        _publish(tmp_path / name, checked)
    (tmp_path / ".staging-c-123").mkdir()
    (tmp_path / "file").write_text("")
    assert published_folders(tmp_path, "info.json") == [tmp_path / "a", tmp_path / "b"]
