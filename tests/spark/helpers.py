"""Helpers of the Spark writer tests."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any


class Collector:
    """Messages of one subscription, with what was on disk when each arrived."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.files_at_receipt: dict[str, int] = {}
        self._cond = threading.Condition()

    def __call__(self, msg: Any) -> None:
        for loc in getattr(msg, "locations", []) or []:
            self.files_at_receipt[loc] = count_data_files(loc)
        with self._cond:
            self.messages.append(msg)
            self._cond.notify_all()

    def wait_for(self, n: int, timeout: float = 30.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return list(self.messages)


def local_path(location: str) -> Path:
    assert location.startswith("file:"), location
    return Path(location[len("file:"):])


def count_data_files(location: str) -> int:
    """Parquet files in a partition directory (tests only: the table is on local disk)."""
    return len(list(local_path(location).glob("*.parquet")))
