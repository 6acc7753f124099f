"""Modules stay small enough to read: at most MAX_LINES lines each (the style guide's rule).

Counts every Python file of the package's layer folders, the tests, the
benchmarks and the scripts; a file that grows past the limit is split where
its responsibilities part, not squeezed.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
FOLDERS = ("partition_notify", "store", "revisions", "publisher", "transports", "subscriber",
           "writers", "integrations", "tests", "bench", "scripts")


def test_every_module_has_at_most_400_lines() -> None:
    too_long = {
        str(p.relative_to(ROOT)): n
        for folder in FOLDERS
        for p in sorted((ROOT / folder).rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not too_long, f"modules over {MAX_LINES} lines: {too_long}"
