"""Durable commits counted where SQLite writes them: the commit frames of the WAL file.

A SQLite store's appends commit on the driver (store/sqlite_writer.py), past
SQLAlchemy's ``commit`` event; the WAL is what every commit must reach.
"""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

WAL_HEADER, FRAME_HEADER = 32, 24


def truncate(db: Path) -> None:
    """Checkpoint and empty the WAL: counting starts from here (no writer may be busy)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def commits(db: Path) -> int:
    """Commit frames in ``db``'s WAL since :func:`truncate` (frames of the current salt)."""
    data = Path(f"{db}-wal").read_bytes() if Path(f"{db}-wal").exists() else b""
    if len(data) < WAL_HEADER:
        return 0
    page_size, salt = struct.unpack(">I", data[8:12])[0], data[16:24]
    count, at = 0, WAL_HEADER
    while at + FRAME_HEADER + page_size <= len(data):
        if data[at + 8:at + 16] != salt:
            break  # frames of an earlier generation of the file
        count += struct.unpack(">I", data[at + 4:at + 8])[0] != 0  # db size: a commit
        at += FRAME_HEADER + page_size
    return count
