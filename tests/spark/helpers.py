"""Helpers of the Spark writer tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.collect import Collector as BaseCollector


class Collector(BaseCollector):
    """Messages of one subscription, with what was on disk when each arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.files_at_receipt: dict[str, int] = {}

    def observe(self, msg: Any) -> None:
        for loc in getattr(msg, "locations", []) or []:
            self.files_at_receipt[loc] = count_data_files(loc)


def local_path(location: str) -> Path:
    assert location.startswith("file:"), location
    return Path(location[len("file:"):])


def count_data_files(location: str) -> int:
    """Parquet files in a partition directory (tests only: the table is on local disk)."""
    return len(list(local_path(location).glob("*.parquet")))
