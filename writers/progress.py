"""A one-line progress report while Spark works (for demos and interactive jobs)."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Progress:
    """Rewrites one line on ``stream`` with the active Spark stages' task counts.

    On a stream that is not a terminal (a log file, CI output) a carriage return
    does not rewrite anything: there each change of status is a line of its own,
    and a status that did not change is not written again.
    """

    def __init__(self, spark: SparkSession, label: str, *, stream: TextIO | None = None,
                 interval: float = 0.5) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pn-progress", daemon=True)
        self._start = time.monotonic()
        self._width = 0
        self._last = ""
        isatty = getattr(self.stream, "isatty", None)
        self._terminal = bool(isatty()) if callable(isatty) else False

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._show("failed" if exc is not None else "written", end="\n")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            parts = []
            try:
                for stage_id in self.tracker.getActiveStageIds():
                    info = self.tracker.getStageInfo(stage_id)
                    if info is not None:
                        parts.append(f"stage {stage_id} {info.numCompletedTasks}"
                                     f"/{info.numTasks} tasks")
            except Exception:  # progress is best effort
                return
            self._show(", ".join(parts) or "working")

    def _show(self, text: str, end: str = "") -> None:
        line = f"[partition-notify] {self.label}: {text} ({time.monotonic() - self._start:.0f} s)"
        if not self._terminal:
            if text != self._last:
                self._last = text
                self.stream.write(line + "\n")
                self.stream.flush()
            return
        pad = " " * max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write(f"\r{line}{pad}{end}")
        self.stream.flush()
