"""An in-memory store URL is refused by every command, naming it (session 18).

Each command is a process of its own: before, ``register`` with ``--store-url
sqlite://`` printed the table and exited 0, and the next command could not find it.
"""

from __future__ import annotations

import pytest

from partition_notify.cli import main

MEMORY = ["sqlite://", "sqlite:///", "sqlite:///:memory:"]


@pytest.mark.parametrize("url", MEMORY)
@pytest.mark.parametrize("argv", [["register", "db.t", "--keys", "a"], ["tables"],
                                  ["mark-done", "db.t", "a=1"], ["rev", "begin", "db.t"]],
                         ids=lambda a: a[0] if isinstance(a, list) else a)
def test_an_in_memory_store_is_refused(url: str, argv: list[str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["--store-url", url, *argv])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    assert code == 1, captured
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "in-memory database" in lines[0] and repr(url) in lines[0], lines
    assert captured.out == ""


def test_a_file_store_still_works(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store-url", sqlite_url, "register", "db.t", "--keys", "a"]) == 0
    assert main(["--store-url", sqlite_url, "tables"]) == 0
    assert "db.t" in capsys.readouterr().out
